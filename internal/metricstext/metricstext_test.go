package metricstext

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWriter(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.Header(Family{"q_info", "Help."})
	w.Sample("q_info", LabelSet(nil, "name", `a"b\c`+"\n", "kind", "K"), 1)
	w.Sample("q_info", nil, 1e6)
	w.Sample("q_info", LabelSet(nil), 0.5)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "# HELP q_info Help.\n# TYPE q_info gauge\n" +
		`q_info{name="a\"b\\c\n",kind="K"} 1` + "\n" +
		"q_info 1e+06\n" +
		"q_info{} 0.5\n"
	if d := cmp.Diff(want, buf.String()); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
