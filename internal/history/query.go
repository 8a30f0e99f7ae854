package history

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
)

// Query selects entries: of one consumer, about one object, or both.
type Query struct {
	// ConsumerKind and ConsumerName select a consumer (kind compared without
	// case); empty selects every consumer.
	ConsumerKind, ConsumerName string
	// ObjectKind, ObjectNamespace and ObjectName select entries about an
	// object: the object itself, or the object a claim is for.
	ObjectKind, ObjectNamespace, ObjectName string
}

// Row is an entry and whose history it is in.
type Row struct {
	Consumer Consumer `json:"consumer"`
	Entry
}

// Select returns the entries of the history ConfigMaps that q selects,
// oldest first.
func Select(cms []corev1.ConfigMap, q Query) ([]Row, error) {
	var out []Row
	for i := range cms {
		c := ConsumerOf(&cms[i])
		if q.ConsumerName != "" && (c.Name != q.ConsumerName || !strings.EqualFold(c.Kind, q.ConsumerKind)) {
			continue
		}
		entries, err := Decode(&cms[i])
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if q.ObjectName == "" || q.matches(e.Object) || (e.For != nil && q.matches(*e.For)) {
				out = append(out, Row{Consumer: c, Entry: e})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Row) int { return a.Time.Compare(b.Time) })
	return out, nil
}

func (q Query) matches(o ObjectRef) bool {
	return o.Name == q.ObjectName && o.Namespace == q.ObjectNamespace && (q.ObjectKind == "" || strings.EqualFold(o.Kind, q.ObjectKind))
}

// Print writes rows as a table: when, whose, what, about which object, what
// was asked, the buckets' numbers then, and the message.
func Print(w io.Writer, rows []Row) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tCONSUMER\tEVENT\tOBJECT\tREQUESTED\tBUCKET LIMIT/ALLOCATED/AVAILABLE\tPOLICY\tMESSAGE")
	for _, r := range rows {
		obj := r.Object.String()
		if r.For != nil {
			obj += " for " + r.For.String()
		}
		var req, buckets []string
		for _, a := range r.Requests {
			req = append(req, fmt.Sprintf("%d %s", a.Amount, a.ResourceType))
		}
		for _, b := range r.Buckets {
			buckets = append(buckets, fmt.Sprintf("%s %d/%d/%d", b.ResourceType, b.Limit, b.Allocated, b.Available))
		}
		fmt.Fprintf(tw, "%s\t%s %s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Time.Format("2006-01-02T15:04:05.000Z07:00"), r.Consumer.Kind, r.Consumer.Name,
			r.Event, obj, dash(strings.Join(req, ", ")), dash(strings.Join(buckets, ", ")), dash(r.Policy), dash(r.Message))
	}
	_ = tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
