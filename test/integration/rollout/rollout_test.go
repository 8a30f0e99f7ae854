package rollout

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

const amountField = "spec.target.resourceClaimTemplate.spec.requests[0].amount"

// A policy with a typo, applied in Audit, admits every create and charges
// nothing; its status.impact names the field that fails and an example
// object. Fixed and switched to Enforce, the objects stored meanwhile are
// charged exactly once, and a second pass charges nothing again.
func TestATypoInAuditThenFixedAndEnforced(t *testing.T) {
	w := newWorld(t, 100)
	before := []*corev1.ConfigMap{w.mustConfigMap("before-1", map[string]string{"replicas": "2"}), w.mustConfigMap("before-2", map[string]string{"replicas": "2"})}
	p := w.policy("{{ trigger.data.replcias }}", quotav1alpha1.PolicyModeAudit)
	w.waitPolicy(p, "in mode Audit alone", func(p *quotav1alpha1.ClaimCreationPolicy) bool {
		return p.Status.Mode == "Audit" && p.Status.Enforced == nil && p.Status.Trial != nil && p.Status.Trial.Generation == p.Generation
	})
	w.waitInForce(p, p.Generation, quotav1alpha1.PolicyModeAudit)

	// Audit admits what enforcing would refuse, and charges nothing.
	during := []*corev1.ConfigMap{w.mustConfigMap("during-1", map[string]string{"replicas": "3"}), w.mustConfigMap("during-2", map[string]string{"replicas": "3"})}
	if w.warned.Contains("replcias") {
		t.Errorf("mode Audit warned the client: %q", w.warned.All())
	}
	if n := len(w.claims(p)); n != 0 {
		t.Fatalf("mode Audit made claims for %d objects, want none", n)
	}
	w.WaitBucket(quotatest.N(100, 0, 100), "configmaps")

	// The status names the field and an example, and counts every object.
	w.waitPolicy(p, "showing the typo in status.impact", func(p *quotav1alpha1.ClaimCreationPolicy) bool {
		im := p.Status.Impact
		return im != nil && im.Generation == p.Generation && im.FailedToEvaluate == 4 && len(im.EvaluationErrors) > 0
	})
	im := p.Status.Impact
	e := im.EvaluationErrors[0]
	if e.FieldRef != amountField || !strings.Contains(e.Message, "replcias") || !strings.HasPrefix(e.Example, "ConfigMap "+w.NS+"/") || e.Count != 4 {
		t.Errorf("evaluation error %+v; want field %s, a message naming replcias, an example ConfigMap of %s, count 4", e, amountField, w.NS)
	}
	if im.Mode != quotav1alpha1.PolicyModeAudit || im.Matched != 4 || im.WouldCharge != 0 || !contains(im.Message, amountField, "replcias") {
		t.Errorf("impact %+v", im)
	}
	if len(im.Reasons) != 1 || im.Reasons[0].Reason != "EvaluationFailed" || im.Reasons[0].Count != 4 {
		t.Errorf("reasons %+v, want EvaluationFailed 4", im.Reasons)
	}
	// kubectl get shows the mode; -o wide what it cannot evaluate.
	if cells := w.row(p.Name); cells["Mode"] != "Audit" || cells["Eval-Errors"] != "4" || cells["Would-Refuse"] != "0" {
		t.Errorf("kubectl get's row of the policy: %v; want Mode Audit, Eval-Errors 4, Would-Refuse 0", cells)
	}
	// Objects stored under a policy that does not enforce are not missing
	// claims.
	quotatest.VerifyClean(t, srv)

	// Fixed and switched to Enforce: the four objects are charged once.
	w.edit(p, func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Target.ResourceClaimTemplate.Spec.Requests[0].Amount.StrVal = "{{ trigger.data.replicas }}"
		p.Spec.Mode = quotav1alpha1.PolicyModeEnforce
	})
	w.waitPolicy(p, "enforced, its existing objects charged", func(p *quotav1alpha1.ClaimCreationPolicy) bool {
		st := p.Status.ExistingObjects
		return p.Status.Mode == "Enforce" && p.Status.Trial == nil && p.Status.Impact == nil && st != nil && st.Generation == p.Generation
	})
	if st := p.Status.ExistingObjects; st.Charged != 4 || st.NotCharged != 0 || st.OverLimit != 0 {
		t.Fatalf("existing objects at the switch: %+v; want 4 charged", st)
	}
	w.WaitBucket(quotatest.N(100, 2+2+3+3, 100-10), "configmaps")
	w.onceEach(p, append(before, during...)...)

	// A second pass (what verify --repair asks for) charges nothing again.
	w.edit(p, func(p *quotav1alpha1.ClaimCreationPolicy) {
		metav1.SetMetaDataAnnotation(&p.ObjectMeta, quotav1alpha1.AnnotationChargeExisting, "again")
	})
	w.waitPolicy(p, "through a second pass", func(p *quotav1alpha1.ClaimCreationPolicy) bool {
		st := p.Status.ExistingObjects
		return st != nil && st.Request == "again"
	})
	if st := p.Status.ExistingObjects; st.Charged != 0 {
		t.Errorf("a second pass charged %d objects again: %+v", st.Charged, st)
	}
	w.WaitBucket(quotatest.N(100, 10, 90), "configmaps")
	w.onceEach(p, append(before, during...)...)
	quotatest.VerifyClean(t, srv)
}

// Mode Warn admits every create, charges nothing, and tells the client what
// enforcing would have charged, or refused and why.
func TestWarnModeSaysWhatEnforcingWouldDo(t *testing.T) {
	w := newWorld(t, 3)
	p := w.policy("{{ trigger.data.n }}", quotav1alpha1.PolicyModeWarn)
	w.waitInForce(p, p.Generation, quotav1alpha1.PolicyModeWarn)

	w.mustConfigMap("fits", map[string]string{"n": "2"})
	want := "ClaimCreationPolicy " + p.Name + " (generation 1, mode Warn): enforcing, it would charge 2 of " + string(w.RT("configmaps")) + " to Organization " + w.Org.Name + "; nothing was charged"
	if !w.warned.Contains(want) {
		t.Errorf("warnings %q; want %q", w.warned.All(), want)
	}
	w.warned.Reset()
	w.mustConfigMap("too-big", map[string]string{"n": "5"})
	if !w.warned.Contains("(generation 1, mode Warn): enforcing, it would refuse this ConfigMap: ") || !w.warned.Contains("limit 3") {
		t.Errorf("warnings %q; want one saying enforcing would refuse it, naming the limit 3", w.warned.All())
	}
	w.warned.Reset()
	w.mustConfigMap("no-n", nil)
	if !w.warned.Contains("enforcing, it would refuse this ConfigMap: it cannot be evaluated for it: " + amountField) {
		t.Errorf("warnings %q; want one saying it cannot be evaluated, naming %s", w.warned.All(), amountField)
	}
	if n := len(w.claims(p)); n != 0 {
		t.Errorf("mode Warn made %d claims", n)
	}
	w.WaitBucket(quotatest.N(3, 0, 3), "configmaps")
	m := scrape(t)
	for _, result := range []string{"would_charge", "would_refuse", "invalid_object"} {
		if got := count(m, p.Name, "warn", result); got < 1 {
			t.Errorf("milo_quota_admission_result_total{mode=warn,result=%s,policy_name=%s} = %v, want at least 1", result, p.Name, got)
		}
	}
	if got := count(m, p.Name, "enforce", "granted") + count(m, p.Name, "enforce", "denied"); got != 0 {
		t.Errorf("a policy only warning counted %v creates as enforced", got)
	}
	quotatest.VerifyClean(t, srv)
}

// A staged edit runs in Audit beside the generation it edits, which keeps
// enforcing: creates meanwhile are charged by the old generation. Promoted
// (mode Enforce), the new generation charges new creates, and nothing
// already charged is charged again.
func TestAStagedEditIsPromotedWithNothingChargedTwice(t *testing.T) {
	w := newWorld(t, 100)
	p := w.policy("1", quotav1alpha1.PolicyModeEnforce)
	w.waitInForce(p, 1, quotav1alpha1.PolicyModeEnforce)
	a := w.mustConfigMap("a", nil)
	w.WaitBucket(quotatest.N(100, 1, 99), "configmaps")

	w.edit(p, func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Target.ResourceClaimTemplate.Spec.Requests[0].Amount.StrVal = "2"
		p.Spec.Mode, p.Spec.Staged = quotav1alpha1.PolicyModeAudit, true
	})
	w.waitPolicy(p, "staged beside generation 1", func(p *quotav1alpha1.ClaimCreationPolicy) bool {
		return p.Status.Mode == "Enforce+Audit" && p.Status.Enforced != nil && p.Status.Enforced.Generation == 1 && p.Status.Trial != nil && p.Status.Trial.Generation == 2
	})
	w.waitInForce(p, 2, quotav1alpha1.PolicyModeAudit)
	b := w.mustConfigMap("b", nil)
	w.WaitBucket(quotatest.N(100, 2, 98), "configmaps") // generation 1 charged it 1
	w.waitPolicy(p, "showing the staged generation's impact", func(p *quotav1alpha1.ClaimCreationPolicy) bool {
		im := p.Status.Impact
		return im != nil && im.Generation == 2 && im.AlreadyCharged == 2
	})

	w.edit(p, func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Mode, p.Spec.Staged = quotav1alpha1.PolicyModeEnforce, false
	})
	w.waitPolicy(p, "promoted, its existing objects examined", func(p *quotav1alpha1.ClaimCreationPolicy) bool {
		st := p.Status.ExistingObjects
		return p.Status.Mode == "Enforce" && st != nil && st.Generation == p.Generation
	})
	if st := p.Status.ExistingObjects; st.Charged != 0 || !strings.Contains(st.Message, "2 already held a claim of this policy") {
		t.Fatalf("promotion charged existing objects again: %+v", st)
	}
	w.waitInForce(p, p.Generation, quotav1alpha1.PolicyModeEnforce)
	c := w.mustConfigMap("c", nil)
	w.WaitBucket(quotatest.N(100, 1+1+2, 96), "configmaps")
	w.onceEach(p, a, b, c)
	quotatest.VerifyClean(t, srv)
}

// Under Enforce, a tenant cannot store an object uncharged by making the
// policy fail on it: the create is refused. Objects stored while the policy
// only audited and that it cannot evaluate are never silently free after
// the switch: status.existingObjects counts them, verify reports them, and
// their next write is refused until it gives the policy what it reads,
// when it is charged.
func TestObjectsThePolicyCannotEvaluateAreNeverLeftFree(t *testing.T) {
	w := newWorld(t, 100)
	p := w.policy("{{ trigger.data.n }}", quotav1alpha1.PolicyModeAudit)
	w.waitInForce(p, p.Generation, quotav1alpha1.PolicyModeAudit)
	odd := w.mustConfigMap("odd", map[string]string{"other": "x"}) // admitted in Audit
	w.mustConfigMap("fine", map[string]string{"n": "2"})

	w.edit(p, func(p *quotav1alpha1.ClaimCreationPolicy) { p.Spec.Mode = quotav1alpha1.PolicyModeEnforce })
	w.waitPolicy(p, "enforced, its existing objects examined", func(p *quotav1alpha1.ClaimCreationPolicy) bool {
		st := p.Status.ExistingObjects
		return st != nil && st.Generation == p.Generation
	})
	if st := p.Status.ExistingObjects; st.Charged != 1 || st.NotCharged != 1 || !contains(st.Message, "ConfigMap "+w.NS+"/odd", "cannot be evaluated") {
		t.Fatalf("existing objects at the switch: %+v; want 1 charged and odd counted as not charged, named", st)
	}
	w.WaitBucket(quotatest.N(100, 2, 98), "configmaps")
	w.waitInForce(p, p.Generation, quotav1alpha1.PolicyModeEnforce)

	// Crafted creates are refused, not stored uncharged.
	for name, data := range map[string]map[string]string{"missing": {"other": "x"}, "not-a-number": {"n": "lots"}, "negative": {"n": "-3"}} {
		_, err := w.configMap("crafted-"+name, data)
		if !apierrors.IsForbidden(err) && !apierrors.IsInternalError(err) {
			t.Errorf("crafted ConfigMap (%s) under Enforce: %v; want it refused", name, err)
		}
	}
	w.WaitBucket(quotatest.N(100, 2, 98), "configmaps")

	// verify reports the one left uncharged.
	r := quotatest.Verify(t, srv)
	found := false
	for _, d := range r.Discrepancies {
		if d.Check == "unevaluable-object" && strings.Contains(d.Problem, "ConfigMap "+w.NS+"/odd") {
			found = true
		}
	}
	if !found {
		t.Fatalf("verify did not report ConfigMap odd, which the policy cannot evaluate: %+v", r.Discrepancies)
	}

	// Its next write is refused until it gives the policy what it reads.
	ctx := context.Background()
	odd.Labels = map[string]string{"touched": "yes"}
	if _, err := w.kube.CoreV1().ConfigMaps(w.NS).Update(ctx, odd, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot be evaluated") {
		t.Fatalf("an update of the unevaluable ConfigMap: %v; want it refused, saying why", err)
	}
	odd.Data = map[string]string{"n": "4"}
	if _, err := w.kube.CoreV1().ConfigMaps(w.NS).Update(ctx, odd, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("an update giving it what the policy reads: %v", err)
	}
	w.WaitBucket(quotatest.N(100, 6, 94), "configmaps")
	quotatest.VerifyClean(t, srv)
}
