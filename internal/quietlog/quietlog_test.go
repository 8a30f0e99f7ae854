package quietlog_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/quotaplane/quotaplane/internal/quietlog"
)

// TestFilter: quotaplane's own messages pass; the printf-style lines only
// the libraries use are dropped, except errors, which are held back until
// ready and counted, and written after.
func TestFilter(t *testing.T) {
	var out bytes.Buffer
	l := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&out)))
	klog.SetLoggerWithOptions(l, klog.ContextualLogger(true), klog.WriteKlogBuffer(l.GetSink().(textlogger.KlogBufferWriter).WriteKlogBuffer))
	defer klog.ClearLogger()
	f := quietlog.Install(&out)
	if f == nil {
		t.Fatal("not installed over a text logger")
	}

	klog.Background().Info("own message", "k", "v")
	klog.Infof("library chatter")
	klog.Warningf("library warning")
	klog.Errorf("library error before ready")
	f.Ready()
	klog.Errorf("library error after ready")
	klog.ErrorS(errors.New("expected list"), "[SHOULD NOT HAPPEN] failed to update managedFields")
	// A watch whose client went away; an event that cannot be encoded.
	klog.Background().WithName("UnhandledError").Error(errors.New("http2: stream closed"), "Failed to encode watch event")
	klog.Background().WithName("UnhandledError").Error(errors.New("unable to encode watch object *v1.Widget: no kind"), "Failed to encode watch event")
	f.Stopping()
	klog.Errorf("library error while stopping")
	klog.Flush()

	got := out.String()
	for _, want := range []string{`"own message" k="v"`, "library error after ready", "unable to encode watch object"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"library chatter", "library warning", "before ready", "while stopping", "not shown", "SHOULD NOT HAPPEN", "http2: stream closed"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("%q shown:\n%s", unwanted, got)
		}
	}
	if !strings.Contains(got, "quietlog_test.go:") {
		t.Errorf("the caller of quotaplane's own message is not its file:\n%s", got)
	}
	// A shutdown that fails ends with its own one-line error: the
	// libraries' errors stay held back (-v=1 shows them).
	f.Failed()
	klog.Flush()
	if strings.Contains(out.String(), "library error while stopping") {
		t.Errorf("a failed shutdown shows the libraries' errors:\n%s", out.String())
	}
}
