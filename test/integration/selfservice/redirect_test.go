package selfservice

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/requests"
	"github.com/quotaplane/quotaplane/test/quotatest"
	"github.com/quotaplane/quotaplane/test/tools"
)

// register adds a resource type charged to consumers of kind, named after
// the world's organization.
func (w *world) register(what, kind string) string {
	w.t.Helper()
	rt := w.org + ".example.com/" + what
	w.create(&quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: strings.ReplaceAll(rt, "/", "-")},
		Spec: quotav1alpha1.ResourceRegistrationSpec{
			ConsumerType: quotav1alpha1.ConsumerTypeRef{APIGroup: rmv1alpha1.GroupName, Kind: kind},
			Type:         quotav1alpha1.RegistrationTypeAllocation, ResourceType: quotav1alpha1.ResourceType(rt), BaseUnit: "unit"}})
	return rt
}

// stage is the first step of the redirect: the organization's owner creates a
// grant (for its project, which it may grant) under the name the request's
// grant will have, so that the approval stalls. It must be refused.
func (w *world) stage(name string) (staged bool) {
	w.t.Helper()
	err := w.tenant.Create(context.Background(), w.grantFor(name, w.consumer("Project", w.proj), w.projectRT, 0))
	if !apierrors.IsForbidden(err) {
		w.t.Errorf("the owner creating ResourceGrant %s, a quota request's grant name: want 403, got %v", name, err)
		return err == nil
	}
	mustContain(w.t, err, name, "reserved to the quota request controller")
	return false
}

// settled waits until the request is Approved, or stalled on a grant that is
// not its own; a stalled request's staged grant is then deleted by the
// owner, as the attacker would, and the approval waited for.
func (w *world) settled(qr *quotav1alpha1.QuotaRequest, staged bool) *quotav1alpha1.QuotaRequest {
	w.t.Helper()
	got := w.until(qr, func(q *quotav1alpha1.QuotaRequest) bool {
		return q.Status.State == quotav1alpha1.QuotaRequestApproved || strings.Contains(q.Status.Message, "is not this request's")
	})
	if got.Status.State != quotav1alpha1.QuotaRequestApproved && staged {
		g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: requests.GrantName(qr)}}
		if err := w.tenant.Delete(context.Background(), g); err != nil {
			w.t.Fatalf("freeing the staged grant's name: %v", err)
		}
	}
	return w.state(qr, quotav1alpha1.QuotaRequestApproved)
}

// editSpec tries each change of spec a tenant could make to a request it
// asked; each must be refused with a 422 on the field.
func (w *world) editSpec(qr *quotav1alpha1.QuotaRequest, otherType string) {
	w.t.Helper()
	for field, patch := range map[string]string{
		"spec.resourceType":   `{"spec":{"resourceType":"` + otherType + `"}}`,
		"spec.consumerRef":    `{"spec":{"consumerRef":{"kind":"Project","name":"` + w.proj + `"}}}`,
		"spec.requestedLimit": `{"spec":{"requestedLimit":4700}}`,
		"spec.dimensions":     `{"spec":{"dimensions":[{"key":"region","value":"east"}]}}`,
		"spec.justification":  `{"spec":{"justification":"something else"}}`,
		"spec.contact":        `{"spec":{"contact":null}}`,
	} {
		err := w.tenant.Patch(context.Background(), qr.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(patch)))
		if !apierrors.IsInvalid(err) {
			w.t.Errorf("the owner changing %s of a request it asked: want 422, got %v", field, err)
			continue
		}
		mustContain(w.t, err, field, "cannot change")
	}
}

// checkGrant says the request made one grant: for the consumer, resource type
// and amount that were decided.
func (w *world) checkGrant(qr *quotav1alpha1.QuotaRequest, consumer quotav1alpha1.ConsumerRef, rt string, amount int64) {
	w.t.Helper()
	gs := grantsOf(w.t, w.admin, w.ns, qr.Name)
	if len(gs) != 1 {
		w.t.Fatalf("request %s made %d grants: %+v", qr.Name, len(gs), gs)
	}
	g := gs[0]
	a := g.Spec.Allowances
	if g.Name != requests.GrantName(qr) || g.Spec.ConsumerRef != consumer || len(a) != 1 || string(a[0].ResourceType) != rt ||
		len(a[0].Buckets) != 1 || a[0].Buckets[0].Amount != amount || len(a[0].Buckets[0].Dimensions) != 0 {
		w.t.Fatalf("the approval of %d %s for %s became ResourceGrant %s: %s %s, %+v", amount, rt, consumer.Name, g.Name,
			g.Spec.ConsumerRef.Kind, g.Spec.ConsumerRef.Name, a)
	}
	d := qr.Status.Decision
	if d == nil || d.ConsumerRef == nil || *d.ConsumerRef != consumer || string(d.ResourceType) != rt || len(d.Dimensions) != 0 {
		w.t.Errorf("the decision does not record what was decided: %+v", d)
	}
}

// TestApprovalCannotBeRedirected: the organization's owner stages a grant
// under the request's grant name (so the approval stalls), edits the
// request's resource type and consumer while it waits, then frees the name.
// The name is reserved, the spec cannot change, and the approval makes the
// grant that was decided: +37 of the resource type asked, for the
// organization. Nobody but the request controller writes a grant under such
// a name, platform admins included.
func TestApprovalCannotBeRedirected(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	org := w.consumer("Organization", w.org)
	machines := w.register("machines", "Organization")
	qr := w.ask(w.request(org, w.rt, 47))
	staged := w.stage(requests.GrantName(qr))
	w.editSpec(qr, machines)
	// A decision naming another subject records the request's own: serve's
	// admission copies it from the stored spec.
	project := w.consumer("Project", w.proj)
	if err := w.decide(w.staff, qr, quotav1alpha1.QuotaRequestDecision{Verdict: quotav1alpha1.VerdictApprove,
		ConsumerRef: &project, ResourceType: quotav1alpha1.ResourceType(machines)}); err != nil {
		t.Fatal(err)
	}
	qr = w.settled(qr, staged)
	w.checkGrant(qr, org, w.rt, 37)
	w.bucket(org, w.rt, func(b *quotav1alpha1.AllowanceBucket) bool { return b.Status.Limit == 47 })

	// The request's grant is the controller's: the owner can neither change
	// nor delete it, and nobody else can create one under such a name.
	g := &quotav1alpha1.ResourceGrant{}
	if err := w.admin.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: requests.GrantName(qr)}, g); err != nil {
		t.Fatal(err)
	}
	if err := w.tenant.Delete(ctx, g.DeepCopy()); !apierrors.IsForbidden(err) {
		t.Errorf("the owner deleting its request's grant: want 403, got %v", err)
	}
	err := w.tenant.Patch(ctx, g.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"mine":"yes"}}}`)))
	if !apierrors.IsForbidden(err) {
		t.Errorf("the owner changing its request's grant: want 403, got %v", err)
	}
	err = w.admin.Create(ctx, w.grantFor("quota-request-by-hand", org, w.rt, 5))
	if !apierrors.IsForbidden(err) {
		t.Errorf("a platform admin creating a grant named quota-request-*: want 403, got %v", err)
	}
	mustContain(t, err, "quota-request-by-hand", "reserved to the quota request controller")
	if gs := grantsOf(t, w.admin, w.ns, qr.Name); len(gs) != 1 || gs[0].Spec.Allowances[0].Buckets[0].Amount != 37 {
		t.Fatalf("the request's grant after the refused writes: %+v", gs)
	}
	// Break-glass: system:masters may delete one (a delete only takes back).
	if err := w.admin.Delete(ctx, g.DeepCopy()); err != nil {
		t.Errorf("system:masters deleting a request's grant: %v", err)
	}
}

// TestRuleApprovalCannotBeRedirected: with an approval rule limited to one
// resource type, the owner names its request in advance, stages a grant
// under its grant name, asks, and while the rule's approval stalls changes
// the resource type: the rule's approval still grants only the type it was
// decided for.
func TestRuleApprovalCannotBeRedirected(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	org := w.consumer("Organization", w.org)
	machines := w.register("machines", "Organization")
	rule := &quotav1alpha1.QuotaApprovalRule{ObjectMeta: metav1.ObjectMeta{Name: "up-to-100-" + w.org}, Spec: quotav1alpha1.QuotaApprovalRuleSpec{
		ResourceTypes: []quotav1alpha1.ResourceType{quotav1alpha1.ResourceType(w.rt)}, Expression: "request.spec.requestedLimit <= 100"}}
	w.create(rule)
	t.Cleanup(func() { _ = w.admin.Delete(ctx, rule) })

	qr := w.request(org, w.rt, 97)
	qr.GenerateName, qr.Name = "", "by-rule"
	staged := w.stage(requests.GrantName(qr))
	if err := w.tenant.Create(ctx, qr); err != nil {
		t.Fatal(err)
	}
	w.until(qr, func(q *quotav1alpha1.QuotaRequest) bool {
		return q.Status.State == quotav1alpha1.QuotaRequestApproved || strings.Contains(q.Status.Message, "is not this request's")
	})
	w.editSpec(qr, machines)
	qr = w.settled(qr, staged)
	if qr.Status.Decision.Rule != rule.Name {
		t.Fatalf("approved by %q, not by the rule", qr.Status.Decision.DecidedBy)
	}
	w.checkGrant(qr, org, w.rt, 87)
}

// TestApproverPatchesStatusWithKubectl: the documented way staff decide,
// `kubectl patch --subresource=status`, works with the shipped
// quotaplane-quota-approver role and nothing more.
func TestApproverPatchesStatusWithKubectl(t *testing.T) {
	kubectl := tools.Require(t, tools.Kubectl)
	w := newWorld(t)
	org := w.consumer("Organization", w.org)
	qr := w.ask(w.request(org, w.rt, 30))
	token, _ := quotatest.ServiceAccountToken(t, srv.Config, w.ns, "kubectl-staff", "quotaplane-quota-approver", "")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["quotaplane"] = &clientcmdapi.Cluster{Server: srv.Config.Host, CertificateAuthorityData: srv.Config.CAData,
		CertificateAuthority: srv.Config.CAFile, InsecureSkipTLSVerify: srv.Config.Insecure}
	kc.AuthInfos["staff"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["staff"] = &clientcmdapi.Context{Cluster: "quotaplane", AuthInfo: "staff"}
	kc.CurrentContext = "staff"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "--kubeconfig", path, "patch", "qreq", qr.Name, "-n", w.ns, "--subresource=status", "--type=merge",
		"-p", `{"status":{"decision":{"verdict":"Approve","grantedLimit":25}}}`).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl patch --subresource=status as quotaplane-quota-approver: %v\n%s", err, out)
	}
	qr = w.state(qr, quotav1alpha1.QuotaRequestApproved)
	if *qr.Status.GrantedLimit != 25 {
		t.Fatalf("approved through kubectl: %+v", qr.Status)
	}
}
