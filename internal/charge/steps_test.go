package charge

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/charge/inforce/inforcetest"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// engine stands in for this replica's term (route.Decider) and counts what
// it is asked: the steps' contract is about whether and when the engine is
// asked, not about its arithmetic, which internal/engine/admit tests.
type engine struct {
	mu                       sync.Mutex
	evaluated, admitted, rev int
}

func (e *engine) Ready() bool { return true }
func (e *engine) Evaluate(context.Context, []*quotav1alpha1.ResourceClaim) (route.AdmitResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evaluated++
	return route.AdmitResult{Granted: true}, nil
}
func (e *engine) Admit(context.Context, []*quotav1alpha1.ResourceClaim) (route.AdmitResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.admitted++
	return route.AdmitResult{Granted: true}, nil
}
func (e *engine) AdmitUpdate(context.Context, route.ObjectRef, []route.PolicyChange, bool) (route.UpdateResult, error) {
	return route.UpdateResult{}, errors.New("not asked here")
}
func (e *engine) DecideBudget(context.Context, *quotav1alpha1.ResourceGrant, bool) (quota.BudgetResult, error) {
	return quota.BudgetResult{}, errors.New("not asked here")
}
func (e *engine) Review(context.Context, []route.ReviewStep) (route.ReviewResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rev++
	return route.ReviewResult{}, nil
}
func (e *engine) Ended([]*formats.PendingClaim, []quota.Grant, int) {}
func (e *engine) Refused(route.Refusal)                             {}

func (e *engine) asked() (evaluated, admitted int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.evaluated, e.admitted
}

// chargerFor is a Charger with one Ready policy charging every ConfigMap
// to Organization acme, an authorizer that allows verb claim only when
// allow says so, and eng as the leading term.
func chargerFor(t *testing.T, eng *engine, allow bool) *Charger {
	t.Helper()
	dyn := inforcetest.Dynamic(t, inforcetest.ReadyPolicy("configmaps", "ConfigMap", "example.com/configmaps"))
	namespaces := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, ns := range []string{"default", "quota-system"} {
		if err := namespaces.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	h := route.NewHandle()
	h.Lead(eng)
	ch := New(h, "quota-system", nil)
	drained := make(chan struct{})
	t.Cleanup(func() { close(drained) })
	ch.SetDrainedNotification(drained)
	ch.SetDynamicClient(dyn)
	ch.SetAuthorizer(authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		if a.GetVerb() == "claim" && !allow {
			return authorizer.DecisionNoOpinion, "no RBAC policy matched", nil
		}
		return authorizer.DecisionAllow, "", nil
	}))
	ch.namespaces, ch.namespacesReady = corelisters.NewNamespaceLister(namespaces), func() bool { return true }
	if err := ch.Ready(); err != nil {
		t.Fatal(err)
	}
	return ch
}

func configMapCreate(dryRun bool) admission.Attributes {
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "default", UID: "uid-app", CreationTimestamp: metav1.NewTime(time.Now())}}
	return admission.NewAttributesRecord(cm, nil, corev1.SchemeGroupVersion.WithKind("ConfigMap"), "default", "app",
		corev1.SchemeGroupVersion.WithResource("configmaps"), "", admission.Create, &metav1.CreateOptions{}, dryRun,
		&user.DefaultInfo{Name: "mallory"})
}

// TestTheStepsInTheirOrder holds doc.go's contract for every mode: the
// consumer's authorization (step 4) comes before the engine is asked
// (step 5), so a requester who may not charge the consumer is refused 403
// and learns nothing — by a create, a dry run or a review alike; only
// Existing mode (no requester) skips it; Review mode never asks the engine
// for one object, and a dry run only evaluates.
func TestTheStepsInTheirOrder(t *testing.T) {
	for _, tc := range []struct {
		name                string
		mode                Mode
		dryRun, allow       bool
		forbidden           bool
		evaluated, admitted int
		asked               bool // Review mode: a step returned
	}{
		{name: "a create by a requester who may not charge the consumer", mode: Admit, forbidden: true},
		{name: "a dry run by a requester who may not charge the consumer", mode: Admit, dryRun: true, forbidden: true},
		{name: "a review by a requester who may not charge the consumer", mode: Review, forbidden: true},
		{name: "a member cluster's existing object, no requester", mode: Existing, admitted: 1},
		{name: "a create allowed", mode: Admit, allow: true, admitted: 1},
		{name: "a dry run allowed", mode: Admit, dryRun: true, allow: true, evaluated: 1},
		{name: "a review allowed", mode: Review, allow: true, asked: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng := &engine{}
			ch := chargerFor(t, eng, tc.allow)
			res, err := ch.Charge(t.Context(), Request{Attributes: configMapCreate(tc.dryRun), Objects: admission.NewObjectInterfacesFromScheme(clientgoscheme.Scheme), Mode: tc.mode})
			if tc.forbidden != apierrors.IsForbidden(err) || (!tc.forbidden && err != nil) {
				t.Fatalf("answer %v; want forbidden %v", err, tc.forbidden)
			}
			evaluated, admitted := eng.asked()
			if evaluated != tc.evaluated || admitted != tc.admitted {
				t.Errorf("the engine evaluated %d and admitted %d; want %d and %d", evaluated, admitted, tc.evaluated, tc.admitted)
			}
			if got := res.Step != nil && res.Step.Asked; got != tc.asked {
				t.Errorf("a step returned to ask: %v; want %v", got, tc.asked)
			}
		})
	}
}
