package observability

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/history"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// readHistory returns the decision history about an object (kind, ns, name).
func readHistory(t *testing.T, q history.Query, want func([]history.Row) bool) []history.Row {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(srv.Config)
	var rows []history.Row
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := kube.CoreV1().ConfigMaps(engine.DefaultOptions().SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: history.LabelHistory + "=true"})
		if err != nil {
			return false, nil
		}
		if rows, err = history.Select(list.Items, q); err != nil {
			return false, err
		}
		return want(rows), nil
	})
	if err != nil {
		t.Fatalf("history %+v: %v; got %+v", q, err, rows)
	}
	return rows
}

func hasEvent(event string) func([]history.Row) bool {
	return func(rows []history.Row) bool {
		for _, r := range rows {
			if r.Event == event {
				return true
			}
		}
		return false
	}
}

// TestHistoryAnswersWhyAnObjectWasRefused: an admission refusal leaves no
// claim; admission reports it (route.Handle.RecordRefusal) and the history
// of the object says who was charged, what was asked, and what the bucket
// showed at that moment.
func TestHistoryAnswersWhyAnObjectWasRefused(t *testing.T) {
	c := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, c)
	p := f.SecretsPolicy(2)
	for i := range 2 {
		if err := c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i), Namespace: f.NS}}); err != nil {
			t.Fatal(err)
		}
	}
	f.WaitBucket(quotatest.N(2, 2, 0), "secrets")
	// The grants of the two creates are in the consumer's history.
	readHistory(t, history.Query{ConsumerKind: f.Org.Kind, ConsumerName: f.Org.Name, ObjectKind: "Secret", ObjectNamespace: f.NS, ObjectName: "s1"}, hasEvent(history.ClaimGranted))

	err := c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s2", Namespace: f.NS}})
	if err == nil || !strings.Contains(err.Error(), "Insufficient quota resources available") {
		t.Fatalf("the third Secret was not refused for quota: %v", err)
	}
	// What admission reports for that refusal.
	rt := string(f.RT("secrets"))
	srv.Handle.RecordRefusal(route.Refusal{Consumer: convert.ConsumerID(f.Org), Policy: p.Name,
		Object: history.ObjectRef{Kind: "Secret", Namespace: f.NS, Name: "s2"}, Requests: []history.Amount{{ResourceType: rt, Amount: 1}}, Message: err.Error()})
	rows := readHistory(t, history.Query{ObjectKind: "secret", ObjectNamespace: f.NS, ObjectName: "s2"}, hasEvent(history.AdmissionRefused))
	r := rows[len(rows)-1]
	if r.Consumer.Name != f.Org.Name || r.Policy != p.Name || len(r.Buckets) != 1 || r.Buckets[0].Limit != 2 || r.Buckets[0].Allocated != 2 || r.Buckets[0].Available != 0 {
		t.Errorf("refusal of s2 recorded as %+v; want consumer %s, policy %s, bucket 2/2/0", r, f.Org.Name, p.Name)
	}
}

// TestAdmissionRecordsItsRefusals: a create refused at admission is in the
// object's history without anything else calling RecordRefusal.
func TestAdmissionRecordsItsRefusals(t *testing.T) {
	c := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, c)
	f.SecretsPolicy(1)
	for i := range 2 {
		_ = c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i), Namespace: f.NS}})
	}
	rows := readHistory(t, history.Query{ObjectKind: "Secret", ObjectNamespace: f.NS, ObjectName: "s1"}, hasEvent(history.AdmissionRefused))
	if r := rows[len(rows)-1]; len(r.Buckets) != 1 || r.Buckets[0].Available != 0 {
		t.Errorf("refusal recorded as %+v", r)
	}
}

// TestHistoryRecordsGrantAndLimitChanges: a grant created, changed and
// deleted, and the limit it makes, are in the consumer's history; a limit
// change says from what to what.
func TestHistoryRecordsGrantAndLimitChanges(t *testing.T) {
	c := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, c)
	f.Register("cpus")
	g := f.Grant("g", map[string][]quotatest.Bucket{"cpus": {{Amount: 4}}})
	f.WaitBucket(quotatest.N(4, 0, 4), "cpus")
	f.UpdateGrant(g, func(g *quotav1alpha1.ResourceGrant) { g.Spec.Allowances[0].Buckets[0].Amount = 6 })
	f.WaitBucket(quotatest.N(6, 0, 6), "cpus")
	consumer := history.Query{ConsumerKind: f.Org.Kind, ConsumerName: f.Org.Name}
	rows := readHistory(t, consumer, func(rows []history.Row) bool {
		return hasEvent(history.GrantCreated)(rows) && hasEvent(history.GrantChanged)(rows) && hasEvent(history.LimitChanged)(rows)
	})
	for _, r := range rows {
		if r.Event == history.LimitChanged && (r.Message != "limit 4 → 6" || len(r.Buckets) != 1 || r.Buckets[0].Limit != 6) {
			t.Errorf("limit change recorded as %+v", r)
		}
	}
	if err := c.Delete(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	readHistory(t, consumer, hasEvent(history.GrantDeleted))
}
