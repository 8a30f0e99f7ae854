package hierarchy

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestAGrantForAConsumerThatDoesNotExistIsWarned: a grant naming an
// Organization that does not exist — a typo of one that does — is accepted
// (a provisioning pipeline may write it first) with a warning that says so
// and names the organization meant; a grant naming one that exists gets no
// such warning.
func TestAGrantForAConsumerThatDoesNotExistIsWarned(t *testing.T) {
	w := newWorld(t)
	typo := strings.Replace(w.org, "acme", "acem", 1)
	warned := &quotatest.Warnings{}
	cfg := rest.CopyConfig(srv.Config)
	cfg.WarningHandler = warned
	c := quotatest.NewClient(t, cfg)
	ns := engine.DefaultOptions().SystemNamespace
	for _, tc := range []struct {
		name, consumer string
		want           string
	}{
		{"typo", typo, "there is no Organization " + typo + ", so this grant limits nothing until one is created; did you mean " + w.org + "?"},
		{"exists", w.org, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			warned.Reset()
			g := w.grant(ns, "warn-"+tc.name+"-"+w.org, w.consumer("Organization", tc.consumer), 5)
			if err := c.Create(context.Background(), g); err != nil {
				t.Fatalf("a grant for Organization %s: %v; want it accepted", tc.consumer, err)
			}
			t.Cleanup(func() { _ = c.Delete(context.Background(), g) })
			got := warned.String()
			switch {
			case tc.want != "" && !warned.Contains(tc.want):
				t.Errorf("warnings %q; want one containing %q", got, tc.want)
			case tc.want == "" && strings.Contains(got, "there is no"):
				t.Errorf("a grant for an existing organization warned %q", got)
			}
		})
	}
}

// TestATenantIsNotToldOtherTenantsNames: an organization's owner who writes
// a grant naming a project that does not exist — a typo of another
// organization's project — is not told that project's name: the warning
// with the nearest name is the platform's alone.
func TestATenantIsNotToldOtherTenantsNames(t *testing.T) {
	other := newWorld(t, "secretproject")
	w := newWorld(t, "web")
	typo := other.projects[0] + "x"
	warned := &quotatest.Warnings{}
	cfg := rest.CopyConfig(w.ownerCfg)
	cfg.WarningHandler = warned
	c := quotatest.NewClient(t, cfg)
	g := w.grant(w.ns, "typo-"+w.org, w.consumer("Project", typo), 1)
	err := c.Create(context.Background(), g)
	if err == nil {
		t.Cleanup(func() { _ = w.admin.Delete(context.Background(), g) })
	}
	if got := warned.String(); strings.Contains(got, other.projects[0]) || strings.Contains(got, "did you mean") {
		t.Errorf("a tenant's grant for Project %s was answered with warnings %q: another organization's project name", typo, got)
	}
	if err != nil && strings.Contains(err.Error(), other.projects[0]+"?") {
		t.Errorf("a tenant's grant for Project %s was refused naming another organization's project: %v", typo, err)
	}
	if err == nil {
		// Nor on the grant's status or Events, which its organization reads.
		got := w.consumerState(g, quotav1alpha1.GrantConsumerMissing)
		onlyActive(t, got)
		e := w.consumerEvent(g, "there is no Project "+typo)
		if strings.Contains(strings.ReplaceAll(e, typo, ""), other.projects[0]) || strings.Contains(e, "did you mean") {
			t.Errorf("the Event on a tenant's grant for Project %s says %q: another organization's project name", typo, e)
		}
	}
}

// TestAGrantShowsWhetherItsConsumerExists: a grant's conditions are the
// reference implementation's, exactly [Active] "ResourceGrant is active",
// whether or not its consumer exists (its clients assert exactly that, also
// for consumers they never create). A platform's grant naming an
// Organization that does not exist has status.consumerState Missing, which
// kubectl get resourcegrants shows (the server's Table: CONSUMER STATE
// beside ACTIVE; -o wide adds the consumer's kind and name), and a Warning
// Event that names it and the organization meant. Once the organization is
// created the grant is Found; deleted, Missing again. A grant for an
// existing organization is Found from the start. A ConsumerFound condition
// an earlier version wrote is removed at the grant's next status write.
func TestAGrantShowsWhetherItsConsumerExists(t *testing.T) {
	w := newWorld(t)
	typo := strings.Replace(w.org, "acme", "acem", 1)
	ns := engine.DefaultOptions().SystemNamespace
	grants := quotav1alpha1.SchemeGroupVersion.WithResource("resourcegrants")
	g := w.grant(ns, "found-"+w.org, w.consumer("Organization", typo), 5)
	w.create(g)
	t.Cleanup(func() { _ = w.admin.Delete(context.Background(), g) })
	onlyActive(t, w.consumerState(g, quotav1alpha1.GrantConsumerMissing))
	missing := "there is no Organization " + typo + ", so this grant limits nothing until one is created; did you mean " + w.org + "?"
	w.consumerEvent(g, missing)

	table := serverTable(t, grants, ns)
	want := map[string]any{"Active": "True", "Consumer State": string(quotav1alpha1.GrantConsumerMissing), "Consumer Type": "Organization", "Consumer": typo}
	if row := table.Row(t, g.Name); !cmp.Equal(pick(row, want), want) {
		t.Errorf("kubectl get resourcegrants -n %s -o wide, the row of a grant for Organization %s, which does not exist:\n%v\nwant %v", ns, typo, row, want)
	}
	for col, prio := range map[string]int32{"Active": 0, "Consumer State": 0, "Consumer Type": 1, "Consumer": 1} {
		if got := table.Priority(col); got != prio {
			t.Errorf("column %s has priority %d; want %d (0: kubectl get, 1: -o wide)", col, got, prio)
		}
	}

	// The ConsumerFound condition an earlier version wrote goes with the
	// grant's next status write (here, when its consumer appears).
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := &quotav1alpha1.ResourceGrant{}
		if err := w.admin.Get(context.Background(), client.ObjectKeyFromObject(g), got); err != nil {
			return err
		}
		meta.SetStatusCondition(&got.Status.Conditions, metav1.Condition{Type: quotav1alpha1.GrantConditionConsumerFound, Status: metav1.ConditionFalse,
			Reason: quotav1alpha1.GrantReasonConsumerNotFound, Message: missing})
		return w.admin.Status().Update(context.Background(), got)
	}); err != nil {
		t.Fatal(err)
	}
	o := &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: typo}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}}
	w.create(o)
	onlyActive(t, w.consumerState(g, quotav1alpha1.GrantConsumerFound))
	if row := serverTable(t, grants, ns).Row(t, g.Name); row["Consumer State"] != string(quotav1alpha1.GrantConsumerFound) {
		t.Errorf("the row once Organization %s exists: %v; want CONSUMER STATE Found", typo, row)
	}
	if err := w.admin.Delete(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	onlyActive(t, w.consumerState(g, quotav1alpha1.GrantConsumerMissing))

	exists := w.grant(ns, "found-ok-"+w.org, w.consumer("Organization", w.org), 5)
	w.create(exists)
	t.Cleanup(func() { _ = w.admin.Delete(context.Background(), exists) })
	onlyActive(t, w.consumerState(exists, quotav1alpha1.GrantConsumerFound))
}

// onlyActive: the grant's conditions are exactly the reference
// implementation's [Active True GrantActive "ResourceGrant is active"].
func onlyActive(t *testing.T, g *quotav1alpha1.ResourceGrant) {
	t.Helper()
	want := []metav1.Condition{{Type: quotav1alpha1.GrantConditionActive, Status: metav1.ConditionTrue, Reason: quotav1alpha1.GrantReasonActive,
		Message: quota.GrantActiveMessage, ObservedGeneration: g.Generation}}
	if diff := cmp.Diff(want, g.Status.Conditions, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
		t.Errorf("grant %s (consumer %s %s, %s): conditions (-want +got):\n%s", g.Name, g.Spec.ConsumerRef.Kind, g.Spec.ConsumerRef.Name, g.Status.ConsumerState, diff)
	}
}

// pick is the cells of row in the columns of want.
func pick(row, want map[string]any) map[string]any {
	out := map[string]any{}
	for k := range want {
		out[k] = row[k]
	}
	return out
}

// condition reads a grant's condition of a type (zero when absent).
func (w *world) condition(g *quotav1alpha1.ResourceGrant, typ string) metav1.Condition {
	w.t.Helper()
	got := &quotav1alpha1.ResourceGrant{}
	if err := w.admin.Get(context.Background(), client.ObjectKeyFromObject(g), got); err != nil {
		w.t.Fatal(err)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// consumerState waits for a grant's status.consumerState to be state, with
// its status written for its generation, and returns the grant.
func (w *world) consumerState(g *quotav1alpha1.ResourceGrant, state quotav1alpha1.GrantConsumerState) *quotav1alpha1.ResourceGrant {
	w.t.Helper()
	got := &quotav1alpha1.ResourceGrant{}
	w.poll(fmt.Sprintf("status.consumerState %s on grant %s", state, g.Name), func() bool {
		return w.admin.Get(context.Background(), client.ObjectKeyFromObject(g), got) == nil &&
			got.Status.ConsumerState == state && got.Status.ObservedGeneration == got.Generation
	})
	return got
}

// consumerEvent waits for the Warning Event ConsumerNotFound on a grant
// whose message contains text, and returns the message.
func (w *world) consumerEvent(g *quotav1alpha1.ResourceGrant, text string) string {
	w.t.Helper()
	var msg string
	w.poll(fmt.Sprintf("a Warning Event %s on grant %s saying %q", quotav1alpha1.GrantReasonConsumerNotFound, g.Name, text), func() bool {
		events, err := w.kube.CoreV1().Events(g.Namespace).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + g.Name})
		if err != nil {
			return false
		}
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == quotav1alpha1.GrantReasonConsumerNotFound && strings.Contains(e.Message, text) {
				msg = e.Message
				return true
			}
		}
		return false
	})
	return msg
}
