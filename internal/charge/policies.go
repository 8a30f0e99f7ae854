package charge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/policy"
	"github.com/quotaplane/quotaplane/internal/reconcile"
)

var policiesGVR = quotav1alpha1.SchemeGroupVersion.WithResource("claimcreationpolicies")

// inForce is the version of a policy admission enforces.
type inForce struct {
	name          string
	uid           types.UID
	generation    int64
	failurePolicy quotav1alpha1.FailurePolicy
	compiled      *policy.Compiled
	// trigger and target are this version's spec, recorded with an update
	// so that a later leader can check whether the update was stored.
	trigger quotav1alpha1.Trigger
	target  quotav1alpha1.ClaimTarget
}

// policyIndex holds the policies in force by trigger group/kind, rebuilt
// when a policy changes rather than on every create.
type policyIndex struct {
	informer cache.SharedIndexInformer
	// indexed reports whether every policy of the informer's first list
	// has been through indexPolicy. The informer's own HasSynced says only
	// that its store holds them: the handler runs on a goroutine of its
	// own, and a create judged in between would find no policy and be
	// admitted uncharged.
	indexed   func() bool
	byName    map[string]*inForce
	byTrigger map[string][]*inForce
}

// enforcedVersion chooses which version of a policy is in force, so that no
// edit opens a window where its kind is created uncharged:
//   - disabled: none (the user's intent applies at once);
//   - the current generation judged valid: it;
//   - judged invalid: the last valid generation recorded in
//     status.enforced (a policy never valid is not enforced);
//   - not judged yet: the current generation when it compiles here, its
//     fields checked against the schema of the version it names; the last
//     valid one otherwise.
//
// The last valid version is stored in the policy's status, so a restart
// never switches enforcement off.
func (ch *Charger) enforcedVersion(cp *quotav1alpha1.ClaimCreationPolicy) *inForce {
	if cp.Spec.Disabled {
		return nil
	}
	current := func(typed bool) *inForce {
		c, err := ch.compile(cp, typed)
		if err != nil {
			return nil
		}
		return &inForce{name: cp.Name, uid: cp.UID, generation: cp.Generation, failurePolicy: cp.Spec.FailurePolicy, compiled: c,
			trigger: cp.Spec.Trigger, target: cp.Spec.Target}
	}
	lastValid := func() *inForce {
		e := cp.Status.Enforced
		if e == nil {
			return nil
		}
		old := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: cp.Name, Generation: e.Generation},
			Spec: quotav1alpha1.ClaimCreationPolicySpec{Trigger: e.Trigger, Target: e.Target, FailurePolicy: e.FailurePolicy}}
		c, err := ch.compile(old, false)
		if err != nil {
			return nil
		}
		return &inForce{name: cp.Name, uid: cp.UID, generation: e.Generation, failurePolicy: e.FailurePolicy, compiled: c,
			trigger: e.Trigger, target: e.Target}
	}
	ready := meta.FindStatusCondition(cp.Status.Conditions, quotav1alpha1.PolicyConditionReady)
	judged := ready != nil && ready.ObservedGeneration == cp.Generation && cp.Status.ObservedGeneration == cp.Generation
	switch {
	case judged && ready.Status == metav1.ConditionTrue:
		return current(false)
	case judged:
		return lastValid()
	}
	if f := current(true); f != nil {
		return f
	}
	return lastValid()
}

// start begins watching policies on first use (the server serves by then).
func (ch *Charger) start() {
	ch.startOnce.Do(func() {
		f := dynamicinformer.NewDynamicSharedInformerFactory(ch.dynamic, 0)
		idx := &policyIndex{informer: f.ForResource(policiesGVR).Informer(), byName: map[string]*inForce{}, byTrigger: map[string][]*inForce{}}
		ch.policies = idx
		ch.registrations = f.ForResource(registrationsGVR).Informer()
		idx.indexed = func() bool { return false }
		if reg, err := idx.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    ch.indexPolicy,
			UpdateFunc: func(_, obj any) { ch.indexPolicy(obj) },
			DeleteFunc: ch.indexPolicy,
		}); err == nil {
			idx.indexed = reg.HasSynced
		}
		_ = idx.informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			ch.notServed.Store(apierrors.IsNotFound(err))
			cache.DefaultWatchErrorHandler(ctx, r, err)
		})
		stop := ch.drained
		if stop == nil {
			stop = make(chan struct{})
		}
		go idx.informer.Run(stop)
		go ch.registrations.Run(stop)
	})
}

var registrationsGVR = quotav1alpha1.SchemeGroupVersion.WithResource("resourceregistrations")

// units is what one base unit of a resource type is, as a quantity, when its
// registration declares it: policies' amounts written as quantities are
// converted with it.
func (ch *Charger) units(resourceType string) (string, bool) {
	if ch.registrations == nil {
		return "", false
	}
	for _, obj := range ch.registrations.GetStore().List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		if rt, _, _ := unstructured.NestedString(u.Object, "spec", "resourceType"); rt != resourceType {
			continue
		}
		if q, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "baseUnitQuantity"); found && q != nil {
			return fmt.Sprint(q), true
		}
		return "", false
	}
	return "", false
}

// inForce returns the versions in force of the policies whose trigger is
// group/kind.
func (ch *Charger) inForce(group, kind string) ([]*inForce, error) {
	ch.start()
	// Both the policies, indexed, and the registrations their amounts are
	// converted with: judged before, a create would be admitted without
	// its policy, or charged in the wrong unit.
	loaded := func() bool { return ch.policies.indexed() && ch.registrations.HasSynced() }
	if !loaded() {
		ctx, cancel := context.WithTimeout(context.Background(), decideTimeout)
		defer cancel()
		err := wait.PollUntilContextCancel(ctx, 5*time.Millisecond, true, func(context.Context) (bool, error) {
			return loaded() || ch.notServed.Load(), nil
		})
		if ch.notServed.Load() {
			return nil, nil // the CRDs are not installed yet: no policy exists
		}
		if err != nil {
			return nil, errors.New("ClaimCreationPolicies are not loaded yet")
		}
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.policies.byTrigger[group+"/"+kind], nil
}

// indexPolicy keeps the index current as the informer sees a policy change.
func (ch *Charger) indexPolicy(obj any) {
	obj = reconcile.Unwrap(obj)
	u, ok := obj.(runtime.Unstructured)
	if !ok {
		return
	}
	name := u.(metav1.Object).GetName()
	var f *inForce
	if _, exists, _ := ch.policies.informer.GetStore().Get(obj); exists {
		cp := &quotav1alpha1.ClaimCreationPolicy{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), cp); err == nil {
			f = ch.enforcedVersion(cp)
		}
	}
	if f == nil {
		ch.forget(name)
	} else {
		ch.forget(name, f.generation)
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if f == nil {
		delete(ch.policies.byName, name)
	} else {
		ch.policies.byName[name] = f
	}
	index := map[string][]*inForce{}
	for _, f := range ch.policies.byName {
		k := f.compiled.Group + "/" + f.compiled.Kind
		index[k] = append(index[k], f)
	}
	for _, list := range index {
		slices.SortFunc(list, func(a, b *inForce) int { return strings.Compare(a.name, b.name) })
	}
	ch.policies.byTrigger = index
}
