package metricstext

import (
	"bufio"
	"io"
	"strconv"
)

// Family is a gauge family.
type Family struct{ Name, Help string }

// Writer writes families and series.
type Writer struct {
	w   *bufio.Writer
	num []byte
}

// NewWriter writes to w through a buffer; call Flush at the end.
func NewWriter(w io.Writer) *Writer { return &Writer{w: bufio.NewWriterSize(w, 256<<10)} }

// Header starts a family.
func (e *Writer) Header(f Family) {
	e.w.WriteString("# HELP ")
	e.w.WriteString(f.Name)
	e.w.WriteByte(' ')
	e.w.WriteString(f.Help)
	e.w.WriteString("\n# TYPE ")
	e.w.WriteString(f.Name)
	e.w.WriteString(" gauge\n")
}

// Sample writes one series of family name; labels is a label set from
// LabelSet (nil for none).
func (e *Writer) Sample(name string, labels []byte, v float64) {
	e.w.WriteString(name)
	e.w.Write(labels)
	e.w.WriteByte(' ')
	e.num = strconv.AppendFloat(e.num[:0], v, 'g', -1, 64)
	e.w.Write(e.num)
	e.w.WriteByte('\n')
}

// Flush writes what is buffered.
func (e *Writer) Flush() error { return e.w.Flush() }

// LabelSet appends {k="v",...} for the pairs kv to b, escaping values.
func LabelSet(b []byte, kv ...string) []byte {
	b = append(b, '{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, kv[i]...)
		b = append(b, '=', '"')
		for j := 0; j < len(kv[i+1]); j++ {
			switch c := kv[i+1][j]; c {
			case '\\':
				b = append(b, '\\', '\\')
			case '"':
				b = append(b, '\\', '"')
			case '\n':
				b = append(b, '\\', 'n')
			default:
				b = append(b, c)
			}
		}
		b = append(b, '"')
	}
	return append(b, '}')
}
