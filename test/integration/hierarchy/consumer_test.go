package hierarchy

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine"
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
		// Nor on the grant's condition, which its organization reads.
		if c := w.consumerFound(g, metav1.ConditionFalse); strings.Contains(c.Message, other.projects[0]) || strings.Contains(c.Message, "did you mean") {
			t.Errorf("the ConsumerFound condition of a tenant's grant for Project %s says %q: another organization's project name", typo, c.Message)
		}
	}
}

// TestAGrantShowsWhetherItsConsumerExists: the ConsumerFound condition of a
// platform's grant naming an Organization that does not exist is False and
// names the organization meant; it turns True when that organization is
// created, and False again when it is deleted. A grant for an existing
// organization is True from the start.
func TestAGrantShowsWhetherItsConsumerExists(t *testing.T) {
	w := newWorld(t)
	typo := strings.Replace(w.org, "acme", "acem", 1)
	ns := engine.DefaultOptions().SystemNamespace
	g := w.grant(ns, "found-"+w.org, w.consumer("Organization", typo), 5)
	w.create(g)
	t.Cleanup(func() { _ = w.admin.Delete(context.Background(), g) })
	want := "there is no Organization " + typo + ", so this grant limits nothing until one is created; did you mean " + w.org + "?"
	c := w.consumerFound(g, metav1.ConditionFalse)
	if c.Reason != quotav1alpha1.GrantReasonConsumerNotFound || !strings.Contains(c.Message, want) {
		t.Errorf("ConsumerFound of a grant for Organization %s: %s %q; want %s containing %q", typo, c.Reason, c.Message, quotav1alpha1.GrantReasonConsumerNotFound, want)
	}
	if active := w.condition(g, quotav1alpha1.GrantConditionActive); active.Status != metav1.ConditionTrue {
		t.Errorf("Active of a grant for an organization not created yet: %s %s; want True (it applies once the organization exists)", active.Status, active.Reason)
	}

	o := &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: typo}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}}
	w.create(o)
	if c := w.consumerFound(g, metav1.ConditionTrue); c.Reason != quotav1alpha1.GrantReasonConsumerFound {
		t.Errorf("ConsumerFound once Organization %s exists: reason %s; want %s", typo, c.Reason, quotav1alpha1.GrantReasonConsumerFound)
	}
	if err := w.admin.Delete(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	w.consumerFound(g, metav1.ConditionFalse)

	exists := w.grant(ns, "found-ok-"+w.org, w.consumer("Organization", w.org), 5)
	w.create(exists)
	t.Cleanup(func() { _ = w.admin.Delete(context.Background(), exists) })
	w.consumerFound(exists, metav1.ConditionTrue)
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

// consumerFound waits for a grant's ConsumerFound condition to have a status.
func (w *world) consumerFound(g *quotav1alpha1.ResourceGrant, status metav1.ConditionStatus) metav1.Condition {
	w.t.Helper()
	var c metav1.Condition
	w.poll(fmt.Sprintf("ConsumerFound=%s on grant %s", status, g.Name), func() bool {
		c = w.condition(g, quotav1alpha1.GrantConditionConsumerFound)
		return c.Status == status
	})
	return c
}
