package hardening

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestPolicyEditsOpenNoWindow: creates racing edits of their policy. Every
// edit makes a generation that is not judged yet; none may let a create
// through uncharged. Each claim records the generation that computed it.
func TestPolicyEditsOpenNoWindow(t *testing.T) {
	const n = 15
	w := newWorld(t, 100)
	p := w.policy("edited")
	w.WaitPolicyReady(p, metav1.ConditionTrue)
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			errs <- retry.RetryOnConflict(wait.Backoff{Steps: 100, Duration: 10 * time.Millisecond, Factor: 1.2, Jitter: 1, Cap: 200 * time.Millisecond}, func() error {
				cur := &quotav1alpha1.ClaimCreationPolicy{}
				if err := w.C.Get(context.Background(), client.ObjectKeyFromObject(p), cur); err != nil {
					return err
				}
				if cur.Spec.Target.ResourceClaimTemplate.Metadata.Labels == nil {
					cur.Spec.Target.ResourceClaimTemplate.Metadata.Labels = map[string]string{}
				}
				cur.Spec.Target.ResourceClaimTemplate.Metadata.Labels["edit"] = strconv.Itoa(i)
				return w.C.Update(context.Background(), cur)
			})
		}()
		go func() {
			defer wg.Done()
			errs <- w.configMap(w.NS, fmt.Sprintf("cm-%d", i))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a create or an edit failed: %v", err)
		}
	}
	eventually(t, 20*time.Second, "every ConfigMap charged", func() bool {
		_, un := w.uncharged(w.NS, w.NS)
		return len(un) == 0
	})
	stored, un := w.uncharged(w.NS, w.NS)
	if stored != n || len(un) != 0 {
		t.Fatalf("%d ConfigMaps stored, uncharged %v", stored, un)
	}
	for _, c := range w.claimsIn(w.NS) {
		if g := c.Annotations[quotav1alpha1.AnnotationPolicyGeneration]; g == "" {
			t.Errorf("claim %s records no policy generation", c.Name)
		}
	}
	w.WaitBucket(quotatest.N(100, n, 100-n), "units")
}

// TestAnInvalidEditKeepsTheLastValidVersion: an edit the engine judges
// invalid leaves the last valid generation enforced, says so on the policy,
// and creates go on being charged under that generation.
func TestAnInvalidEditKeepsTheLastValidVersion(t *testing.T) {
	w := newWorld(t, 5)
	p := w.policy("kept")
	w.WaitPolicyReady(p, metav1.ConditionTrue)
	valid := p.Generation
	// A resource type nobody registered: compiles, is judged invalid.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := w.C.Get(context.Background(), client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		p.Spec.Target.ResourceClaimTemplate.Spec.Requests[0].ResourceType = "nobody.example.com/registered"
		return w.C.Update(context.Background(), p)
	}); err != nil {
		t.Fatal(err)
	}
	// Judged invalid; admission goes on enforcing the last valid version.
	var cond metav1.Condition
	eventually(t, 30*time.Second, "the edit judged invalid", func() bool {
		if err := w.C.Get(context.Background(), client.ObjectKeyFromObject(p), p); err != nil {
			return false
		}
		c := meta.FindStatusCondition(p.Status.Conditions, quotav1alpha1.PolicyConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.ObservedGeneration != p.Generation {
			return false
		}
		cond = *c
		return true
	})
	mustContain(t, fmt.Errorf("%s", cond.Message), "not registered", fmt.Sprintf("generation %d", valid), "stays enforced")
	if p.Status.Enforced == nil || p.Status.Enforced.Generation != valid {
		t.Fatalf("status.enforced = %+v, want generation %d", p.Status.Enforced, valid)
	}
	// The API answers from etcd; admission from its informer, which may not
	// have seen the judgement yet. Wait until admission says which version it
	// enforces.
	w.WaitPolicyInForce(corev1.SchemeGroupVersion.WithResource("configmaps"),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "in-force-probe", Namespace: w.NS}}, p.Name, valid)
	if err := w.configMap(w.NS, "after-invalid-edit"); err != nil {
		t.Fatalf("a create under the last valid version: %v", err)
	}
	eventually(t, 15*time.Second, "the create charged under the last valid generation", func() bool {
		for _, c := range w.claimsIn(w.NS) {
			if c.Spec.ResourceRef != nil && c.Spec.ResourceRef.Name == "after-invalid-edit" {
				return c.Annotations[quotav1alpha1.AnnotationPolicyGeneration] == strconv.FormatInt(valid, 10) &&
					meta.IsStatusConditionTrue(c.Status.Conditions, quotav1alpha1.ClaimConditionGranted)
			}
		}
		return false
	})
	w.WaitBucket(quotatest.N(5, 1, 4), "units")
}

// TestAnExpressionFailingOnTheObjectRefuses: failurePolicy Ignore covers a
// quota plane that cannot decide, not an object the policy cannot judge.
func TestAnExpressionFailingOnTheObjectRefuses(t *testing.T) {
	w := newWorld(t, 5)
	p := w.policy("reads-data", func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.FailurePolicy = quotav1alpha1.FailurePolicyIgnore
		p.Spec.Trigger.Constraints = append(p.Spec.Trigger.Constraints, quotav1alpha1.Constraint{Expression: `trigger.data.tier == "gold"`})
	})
	w.WaitPolicyReady(p, metav1.ConditionTrue, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: w.NS}, Data: map[string]string{"tier": "gold"}})
	err := w.configMap(w.NS, "no-data")
	if !apierrors.IsForbidden(err) {
		t.Fatalf("a ConfigMap without the field the policy reads: want 403, got %v", err)
	}
	mustContain(t, err, p.Name, "cannot be evaluated", "spec.trigger.constraints[1].expression", `trigger.data.tier == \"gold\"`)
	if err := w.C.Get(context.Background(), client.ObjectKey{Namespace: w.NS, Name: "no-data"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the refused ConfigMap was stored: %v", err)
	}
	gold := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "gold", Namespace: w.NS}, Data: map[string]string{"tier": "gold"}}
	if err := w.C.Create(context.Background(), gold); err != nil {
		t.Fatalf("a ConfigMap the policy can judge: %v", err)
	}
	w.WaitBucket(quotatest.N(5, 1, 4), "units")
}

// TestRenderedClaimsAreCheckedAsTheAPIWould: a claim the API server would
// refuse (a rendered name that is invalid, a namespace that does not exist)
// refuses the create, naming the policy and the field; nothing is stored or
// held. (A literal that can never be valid is refused earlier, when the
// policy is judged.)
func TestRenderedClaimsAreCheckedAsTheAPIWould(t *testing.T) {
	w := newWorld(t, 5)
	bad := w.policy("bad-name", func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Target.ResourceClaimTemplate.Metadata.Name = "claim-{{ trigger.metadata.name.upperAscii() }}"
	})
	w.WaitCondition(bad, quotav1alpha1.PolicyConditionReady, metav1.ConditionTrue)
	var err error
	eventually(t, 30*time.Second, "admission enforcing "+bad.Name, func() bool {
		err = w.C.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: w.NS}}, client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), bad.Name)
	})
	err = w.configMap(w.NS, "x")
	mustContain(t, err, bad.Name, "metadata.name", "not created")
	if err := w.C.Delete(context.Background(), bad); err != nil {
		t.Fatal(err)
	}
	nowhere := w.policy("nowhere", func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Target.ResourceClaimTemplate.Metadata.Namespace = "does-not-exist-" + w.ID
	})
	w.WaitCondition(nowhere, quotav1alpha1.PolicyConditionReady, metav1.ConditionTrue)
	eventually(t, 30*time.Second, "admission enforcing "+nowhere.Name+" alone", func() bool {
		err = w.C.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "y", Namespace: w.NS}}, client.DryRunAll)
		return err != nil && contains(err.Error(), nowhere.Name)
	})
	err = w.configMap(w.NS, "y")
	mustContain(t, err, nowhere.Name, "does-not-exist-"+w.ID, "does not exist")
	stored, _ := w.uncharged(w.NS, w.NS)
	if stored != 0 {
		t.Fatalf("%d ConfigMaps stored after refusals", stored)
	}
	w.WaitBucket(quotatest.N(5, 0, 5), "units")
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
