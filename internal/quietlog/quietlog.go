package quietlog

import (
	"bytes"
	"io"
	"runtime"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// ownModule prefixes the functions whose informational messages are shown.
const ownModule = "github.com/quotaplane/quotaplane/"

// maxHeld bounds what is held back, in bytes.
const maxHeld = 256 << 10

// Filter decides which log lines are written, and when.
type Filter struct {
	out io.Writer
	// gate holds quotaplane's own lines until the ready line is written,
	// so that it is the first thing a user reads; each line is formatted
	// when it is logged, with its own time and caller.
	gate *gate
	// held receives the libraries' errors while they are held back.
	held *bounded

	mu       sync.Mutex
	ready    bool
	stopping bool
}

// Install replaces the klog logger set by the logging flags with one that
// filters it, when that logger writes klog's text format; otherwise it does
// nothing and returns nil. out receives every line written (the logging
// flags' destination is replaced: quietlog is only used at the default
// verbosity, where they name none).
func Install(out io.Writer) *Filter {
	if _, ok := klog.Background().GetSink().(textlogger.KlogBufferWriter); !ok {
		return nil
	}
	f := &Filter{out: out, gate: &gate{out: out}, held: &bounded{max: maxHeld}}
	shown := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(f.gate))).GetSink()
	held := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(f.held))).GetSink()
	s := &sink{f: f, inner: shown, writer: shown.(textlogger.KlogBufferWriter), held: held, heldWriter: held.(textlogger.KlogBufferWriter)}
	klog.SetLoggerWithOptions(logr.New(s), klog.ContextualLogger(true), klog.WriteKlogBuffer(s.WriteKlogBuffer))
	return f
}

// Ready marks the end of start-up: quotaplane's own lines held until now
// are written, the libraries' transient start-up errors are dropped, and
// their errors are written from now on.
func (f *Filter) Ready() { f.end(true) }

// Failed writes quotaplane's own lines held back: start-up, or a shutdown,
// failed.
func (f *Filter) Failed() { f.end(false) }

func (f *Filter) end(ready bool) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if ready && (f.ready || f.stopping) {
		return
	}
	f.ready = ready
	f.gate.open()
	// The libraries' errors held back are not shown even then: the error
	// that ended start-up says what failed in one line; -v=1 shows them.
	f.held.take()
}

// Stopping marks the start of a shutdown: the libraries' errors are held
// back again (their clients race against the API server that is stopping:
// "connection refused"); -v=1 shows them.
func (f *Filter) Stopping() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ready, f.stopping = false, true
}

// passUpstream: the libraries' errors are written now, not held.
func (f *Filter) passUpstream() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ready
}

// gate buffers what is written until it is opened, then passes it on.
type gate struct {
	mu     sync.Mutex
	out    io.Writer
	opened bool
	buf    bytes.Buffer
}

func (g *gate) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.opened {
		return g.out.Write(p)
	}
	if g.buf.Len() < maxHeld {
		g.buf.Write(p)
	}
	return len(p), nil
}

func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.opened {
		return
	}
	g.opened = true
	_, _ = g.out.Write(g.buf.Bytes())
	g.buf.Reset()
}

// bounded keeps at most max bytes written to it.
type bounded struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (b *bounded) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len()+len(p) <= b.max {
		b.buf.Write(p)
	}
	return len(p), nil
}

func (b *bounded) take() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := bytes.Clone(b.buf.Bytes())
	b.buf.Reset()
	return out
}

type sink struct {
	f *Filter
	// inner writes what is shown; held what is held back.
	inner, held        logr.LogSink
	writer, heldWriter textlogger.KlogBufferWriter
}

var (
	_ logr.LogSink                = &sink{}
	_ logr.CallDepthLogSink       = &sink{}
	_ textlogger.KlogBufferWriter = &sink{}
)

func (s *sink) Init(info logr.RuntimeInfo) {
	info.CallDepth++ // this sink's frame
	s.inner.Init(info)
	s.held.Init(info)
}

func (s *sink) Enabled(level int) bool { return s.inner.Enabled(level) }

func (s *sink) Info(level int, msg string, kv ...any) {
	if fromOwnModule() {
		s.inner.Info(level, msg, kv...)
	}
}

func (s *sink) Error(err error, msg string, kv ...any) {
	if isInputNoise(msg) || isClientGone(err, msg) {
		return
	}
	if fromOwnModule() {
		// An error of quotaplane's own before ready (a start-up that
		// stalls): everything held of its own is shown with it, at once.
		s.f.gate.open()
		s.inner.Error(err, msg, kv...)
		return
	}
	if s.f.passUpstream() {
		s.inner.Error(err, msg, kv...)
		return
	}
	s.held.Error(err, msg, kv...)
}

func (s *sink) derive(inner, held logr.LogSink) *sink {
	return &sink{f: s.f, inner: inner, held: held, writer: s.writer, heldWriter: s.heldWriter}
}

func (s *sink) WithValues(kv ...any) logr.LogSink {
	return s.derive(s.inner.WithValues(kv...), s.held.WithValues(kv...))
}

func (s *sink) WithName(name string) logr.LogSink {
	return s.derive(s.inner.WithName(name), s.held.WithName(name))
}

func (s *sink) WithCallDepth(depth int) logr.LogSink {
	cd, ok := s.inner.(logr.CallDepthLogSink)
	hcd, hok := s.held.(logr.CallDepthLogSink)
	if !ok || !hok {
		return s
	}
	return s.derive(cd.WithCallDepth(depth), hcd.WithCallDepth(depth))
}

// WriteKlogBuffer receives the lines of klog's printf-style calls, which
// only the Kubernetes libraries use: errors and fatal lines pass (held back
// before ready), the rest is dropped.
func (s *sink) WriteKlogBuffer(data []byte) {
	if len(data) == 0 {
		return
	}
	switch data[0] {
	case 'E':
		if s.f.passUpstream() {
			s.writer.WriteKlogBuffer(data)
		} else {
			s.heldWriter.WriteKlogBuffer(data)
		}
	case 'F':
		s.f.gate.open() // the process ends: nothing is held
		s.writer.WriteKlogBuffer(data)
	}
}

// isInputNoise: an error the libraries log for a request that is refused
// anyway, with its own clear answer to the client: the field manager cannot
// type an object whose field has the wrong type ("[SHOULD NOT HAPPEN] failed
// to update managedFields" — it does happen, for every such request). Bad
// input is the client's to see, not the operator's; -v=1 shows it.
func isInputNoise(msg string) bool {
	return strings.Contains(msg, "failed to update managedFields")
}

// isClientGone: the API server could not write a watch event because the
// client went away (it closed the watch, or its connection dropped) — the
// library logs it as an UnhandledError ("Failed to encode watch event")
// and ends the watch, as it should; nothing is wrong on the server. An
// event that cannot be encoded ("unable to encode watch object") is a
// server fault and still shown. -v=1 shows both.
func isClientGone(err error, msg string) bool {
	return msg == "Failed to encode watch event" && err != nil && !strings.Contains(err.Error(), "unable to encode watch object")
}

// fromOwnModule reports whether the logging call was made by quotaplane's
// code: the first caller outside logr and klog.
func fromOwnModule() bool {
	var pcs [24]uintptr
	n := runtime.Callers(3, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	for {
		fr, more := frames.Next()
		fn := fr.Function
		switch {
		case strings.HasPrefix(fn, "github.com/go-logr/"), strings.HasPrefix(fn, "k8s.io/klog/"),
			strings.HasPrefix(fn, ownModule+"internal/quietlog."):
		default:
			return strings.HasPrefix(fn, ownModule)
		}
		if !more {
			return false
		}
	}
}
