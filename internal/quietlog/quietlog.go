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

// maxHeld bounds the start-up errors held back.
const maxHeld = 200

// Filter decides which log lines are written.
type Filter struct {
	out io.Writer

	mu      sync.Mutex
	ready   bool
	held    []func()
	dropped int
	// early are quotaplane's own messages before the ready line.
	early []func()
	// stopping: a shutdown began; errors are held back again.
	stopping bool
}

// Install replaces the klog logger set by the logging flags with one that
// filters it, when that logger writes klog's text format; otherwise it does
// nothing and returns nil. out receives the summary of what was held back.
func Install(out io.Writer) *Filter {
	base := klog.Background()
	writer, ok := base.GetSink().(textlogger.KlogBufferWriter)
	if !ok {
		return nil
	}
	f := &Filter{out: out}
	s := &sink{f: f, inner: base.GetSink(), writer: writer}
	klog.SetLoggerWithOptions(logr.New(s), klog.ContextualLogger(true), klog.WriteKlogBuffer(s.WriteKlogBuffer))
	return f
}

// Ready marks the end of start-up: upstream errors are written from now on,
// and those held back are counted in one line.
func (f *Filter) Ready() { f.end(true) }

// Failed writes the errors held back, when start-up did not complete.
func (f *Filter) Failed() { f.end(false) }

func (f *Filter) end(ready bool) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ready || (ready && f.stopping) {
		return
	}
	f.ready = ready
	for _, write := range f.early {
		write()
	}
	f.early = nil
	switch {
	case !ready:
		for _, write := range f.held {
			write()
		}
	}
	f.held, f.dropped = nil, 0
}

// Stopping marks the start of a shutdown: the libraries' errors are held
// back again (their clients race against the API server that is stopping:
// "connection refused"), and written only if Failed is called.
func (f *Filter) Stopping() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ready, f.stopping = false, true
}

// ownInfo handles one of quotaplane's own messages: written at once after
// start-up, and held until the ready line before, so that the ready line
// is the first thing a user sees.
func (f *Filter) ownInfo(write func()) {
	f.mu.Lock()
	if f.ready || f.stopping {
		f.mu.Unlock()
		write()
		return
	}
	defer f.mu.Unlock()
	if len(f.early) < maxHeld {
		f.early = append(f.early, write)
	}
}

// upstreamError handles an error from outside quotaplane; write writes it.
func (f *Filter) upstreamError(write func()) {
	f.mu.Lock()
	if f.ready {
		f.mu.Unlock()
		write()
		return
	}
	defer f.mu.Unlock()
	if len(f.held) < maxHeld {
		f.held = append(f.held, write)
	} else {
		f.dropped++
	}
}

type sink struct {
	f      *Filter
	inner  logr.LogSink
	writer textlogger.KlogBufferWriter
}

var (
	_ logr.LogSink                = &sink{}
	_ logr.CallDepthLogSink       = &sink{}
	_ textlogger.KlogBufferWriter = &sink{}
)

func (s *sink) Init(info logr.RuntimeInfo) {
	info.CallDepth++ // this sink's frame
	s.inner.Init(info)
}

func (s *sink) Enabled(level int) bool { return s.inner.Enabled(level) }

func (s *sink) Info(level int, msg string, kv ...any) {
	if fromOwnModule() {
		s.f.ownInfo(func() { s.inner.Info(level, msg, kv...) })
	}
}

func (s *sink) Error(err error, msg string, kv ...any) {
	if fromOwnModule() {
		s.inner.Error(err, msg, kv...)
		return
	}
	s.f.upstreamError(func() { s.inner.Error(err, msg, kv...) })
}

func (s *sink) WithValues(kv ...any) logr.LogSink {
	return &sink{f: s.f, inner: s.inner.WithValues(kv...), writer: s.writer}
}

func (s *sink) WithName(name string) logr.LogSink {
	return &sink{f: s.f, inner: s.inner.WithName(name), writer: s.writer}
}

func (s *sink) WithCallDepth(depth int) logr.LogSink {
	cd, ok := s.inner.(logr.CallDepthLogSink)
	if !ok {
		return s
	}
	return &sink{f: s.f, inner: cd.WithCallDepth(depth), writer: s.writer}
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
		line := bytes.Clone(data) // klog reuses its buffers
		s.f.upstreamError(func() { s.writer.WriteKlogBuffer(line) })
	case 'F':
		s.writer.WriteKlogBuffer(data)
	}
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
