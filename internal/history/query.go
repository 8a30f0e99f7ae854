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
	// Namespace selects entries whose claim or grant is kept in this
	// namespace: a control plane's quota namespace (docs/control-planes.md).
	Namespace string
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
			if q.Namespace != "" && e.Object.Namespace != q.Namespace {
				continue
			}
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

// Width is the terminal width the default table fits.
const Width = 120

// PrintShort writes rows as a table that fits width columns: when, whose
// (unless oneConsumer: the query named it), what, about which object, and
// the message, each cut with "…" where it would not fit (Print, -o wide,
// writes everything).
func PrintShort(w io.Writer, rows []Row, width int, oneConsumer bool) {
	header := []string{"TIME", "CONSUMER", "EVENT", "OBJECT", "MESSAGE"}
	caps := []int{14, 24, 16, 34, 0} // 0: the rest
	cells := make([][]string, 0, len(rows))
	for _, r := range rows {
		obj := r.Object.Kind + " " + r.Object.Name
		if r.Object.Namespace != "" {
			obj = r.Object.Kind + " " + r.Object.Namespace + "/" + r.Object.Name
		}
		cells = append(cells, []string{r.Time.Local().Format("01-02 15:04:05"), r.Consumer.Kind + " " + r.Consumer.Name,
			r.Event, obj, dash(r.Message)})
	}
	if oneConsumer {
		header, caps = slices.Delete(header, 1, 2), slices.Delete(caps, 1, 2)
		for i := range cells {
			cells[i] = slices.Delete(cells[i], 1, 2)
		}
	}
	widths := make([]int, len(header))
	for i, h := range header {
		widths[i] = runeLen(h)
		for _, c := range cells {
			widths[i] = max(widths[i], runeLen(c[i]))
		}
		if caps[i] > 0 {
			widths[i] = min(widths[i], caps[i])
		}
	}
	const gap = 2
	used := 0
	for i := range len(header) - 1 {
		used += widths[i] + gap
	}
	widths[len(header)-1] = max(width-used, 20)
	line := func(fields []string) {
		var b strings.Builder
		for i, f := range fields {
			f = cut(f, widths[i])
			b.WriteString(f)
			if i < len(fields)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-runeLen(f)+gap))
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	line(header)
	for _, c := range cells {
		line(c)
	}
}

func runeLen(s string) int { return len([]rune(s)) }

// cut shortens s to n runes, ending with "…" when it was longer.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n <= 1 {
		return string(r[:n])
	}
	return string(r[:n-1]) + "…"
}

// Explain says why q selected nothing from the history ConfigMaps cms (the
// ones listed for it) out of all (every history): no history for the
// consumer, or a history with nothing about the object.
func Explain(cms, all []corev1.ConfigMap, q Query) string {
	object := q.ObjectKind + " " + q.ObjectName
	if q.ObjectNamespace != "" {
		object = q.ObjectKind + " " + q.ObjectNamespace + "/" + q.ObjectName
	}
	check := "check the object's kind, namespace and name"
	if q.ObjectName == "" {
		// --control-plane alone: what was asked is a plane's objects.
		object = "an object of the control plane whose quota is kept in namespace " + q.Namespace
		check = "check the plane's name (projects/<name> or organizations/<name>); its objects are recorded once a policy charges them"
	}
	if q.ConsumerName != "" {
		consumer := q.ConsumerKind + " " + q.ConsumerName
		for i := range cms {
			c := ConsumerOf(&cms[i])
			if c.Name != q.ConsumerName || !strings.EqualFold(c.Kind, q.ConsumerKind) {
				continue
			}
			entries, _ := Decode(&cms[i])
			return fmt.Sprintf("%s has %d decisions recorded, none about %s; %s, or leave out --object and --control-plane to see them all",
				consumer, len(entries), object, check)
		}
		var known []string
		for i := range all {
			c := ConsumerOf(&all[i])
			known = append(known, c.Kind+" "+c.Name)
		}
		slices.Sort(known)
		msg := fmt.Sprintf("no decisions recorded for %s: the engine has no history for it (there is no such consumer, or nothing was decided for it yet)", consumer)
		switch {
		case len(known) == 0:
			msg += "; no consumer has a history yet"
		case len(known) <= 10:
			msg += "; consumers with a history: " + strings.Join(known, ", ")
		default:
			msg += fmt.Sprintf("; %d consumers have a history, among them %s", len(known), strings.Join(known[:10], ", "))
		}
		return msg
	}
	if q.ObjectName == "" {
		return fmt.Sprintf("no decision in the %d consumers' histories is about %s; %s", len(all), object, check)
	}
	return fmt.Sprintf("no decision in the %d consumers' histories is about %s; check its kind, namespace and name (a cluster-scoped object has none), or give its consumer with --consumer",
		len(all), object)
}
