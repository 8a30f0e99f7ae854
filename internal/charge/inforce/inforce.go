package inforce

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kube-openapi/pkg/validation/spec"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/policy"
	"github.com/quotaplane/quotaplane/internal/policy/triggerschema"
	"github.com/quotaplane/quotaplane/internal/reconcile"
)

var policiesGVR = quotav1alpha1.SchemeGroupVersion.WithResource("claimcreationpolicies")

// Policy is the version of a policy admission enforces.
type Policy struct {
	Name          string
	UID           types.UID
	Generation    int64
	FailurePolicy quotav1alpha1.FailurePolicy
	Compiled      *policy.Compiled
	// Trigger and Target are this version's spec, recorded with an update
	// so that a later leader can check whether the update was stored.
	Trigger quotav1alpha1.Trigger
	Target  quotav1alpha1.ClaimTarget
	// Mode is Enforce for a version in force (InForce), Warn or Audit for
	// one on trial (Trials).
	Mode quotav1alpha1.PolicyMode
}

// versions are what admission does with one policy: the version it
// enforces and the version it tries (Warn or Audit), either absent.
type versions struct{ enforcing, trial *Policy }

// Index holds the version in force of every ClaimCreationPolicy, by
// trigger group/kind, rebuilt when a policy changes rather than on every
// create, and the ResourceRegistrations their amounts are converted with.
// It starts watching on first use; set its clients before.
type Index struct {
	// Dynamic lists and watches the policies and registrations.
	Dynamic dynamic.Interface
	// Kube reads the trigger kinds' schemas (discovery); nil: none.
	Kube kubernetes.Interface
	// Drained stops the watches when the server drains.
	Drained <-chan struct{}
	// Timeout bounds the wait for the first list.
	Timeout time.Duration

	startOnce sync.Once
	policies  *policyIndex
	// registrations tell how to convert amounts written as quantities.
	registrations cache.SharedIndexInformer
	// notServed is set while listing policies answers NotFound: the CRD is
	// not installed yet, so no policy can exist.
	notServed atomic.Bool

	schemasOnce sync.Once
	schemas     *triggerschema.Resolver

	mu       sync.Mutex
	compiled map[compiledKey]*compiledEntry
}

// New is an empty index.
func New(timeout time.Duration) *Index {
	return &Index{Timeout: timeout, compiled: map[compiledKey]*compiledEntry{}}
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
	byName    map[string]versions
	byTrigger map[string][]*Policy
	trials    map[string][]*Policy
}

// versionsOf chooses which version of a policy is in force, and which is
// on trial, so that no edit opens a window where its kind is created
// uncharged unless the edit says so:
//   - disabled: none (the user's intent applies at once);
//   - the current generation judged valid: it — enforcing when its mode is
//     Enforce; else on trial, beside the generation enforced before it
//     (status.enforced) when staged, alone when not (the user's intent
//     applies at once, as with disabled);
//   - judged invalid: the last valid generations recorded in
//     status.enforced and status.trial (a policy never valid is not
//     enforced);
//   - not judged yet: the current generation, as above, when it compiles
//     here, its fields checked against the schema of the version it names;
//     the last valid ones otherwise.
//
// The last valid versions are stored in the policy's status, so a restart
// never switches enforcement off.
func (x *Index) versionsOf(cp *quotav1alpha1.ClaimCreationPolicy) versions {
	if cp.Spec.Disabled {
		return versions{}
	}
	current := func(typed bool) *Policy {
		c, err := x.compile(cp, typed)
		if err != nil {
			return nil
		}
		return &Policy{Name: cp.Name, UID: cp.UID, Generation: cp.Generation, FailurePolicy: cp.Spec.FailurePolicy, Compiled: c,
			Trigger: cp.Spec.Trigger, Target: cp.Spec.Target, Mode: quotav1alpha1.ModeOf(cp.Spec.Mode)}
	}
	stored := func(generation int64, tr quotav1alpha1.Trigger, tg quotav1alpha1.ClaimTarget, fp quotav1alpha1.FailurePolicy, mode quotav1alpha1.PolicyMode) *Policy {
		old := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: cp.Name, Generation: generation},
			Spec: quotav1alpha1.ClaimCreationPolicySpec{Trigger: tr, Target: tg, FailurePolicy: fp}}
		c, err := x.compile(old, false)
		if err != nil {
			return nil
		}
		return &Policy{Name: cp.Name, UID: cp.UID, Generation: generation, FailurePolicy: fp, Compiled: c, Trigger: tr, Target: tg, Mode: mode}
	}
	lastValid := func() versions {
		var v versions
		if e := cp.Status.Enforced; e != nil {
			v.enforcing = stored(e.Generation, e.Trigger, e.Target, e.FailurePolicy, quotav1alpha1.PolicyModeEnforce)
		}
		if t := cp.Status.Trial; t != nil {
			v.trial = stored(t.Generation, t.Trigger, t.Target, "", t.Mode)
		}
		return v
	}
	// place puts a valid current generation where its mode says.
	place := func(f *Policy) versions {
		if f.Mode == quotav1alpha1.PolicyModeEnforce {
			return versions{enforcing: f}
		}
		v := versions{trial: f}
		if cp.Spec.Staged {
			v.enforcing = lastValid().enforcing
		}
		return v
	}
	ready := meta.FindStatusCondition(cp.Status.Conditions, quotav1alpha1.PolicyConditionReady)
	judged := ready != nil && ready.ObservedGeneration == cp.Generation && cp.Status.ObservedGeneration == cp.Generation
	switch {
	case judged && ready.Status == metav1.ConditionTrue:
		if f := current(false); f != nil {
			return place(f)
		}
		return versions{}
	case judged:
		return lastValid()
	}
	if f := current(true); f != nil {
		return place(f)
	}
	return lastValid()
}

// start begins watching policies on first use (the server serves by then).
func (x *Index) start() {
	x.startOnce.Do(func() {
		f := dynamicinformer.NewDynamicSharedInformerFactory(x.Dynamic, 0)
		idx := &policyIndex{informer: f.ForResource(policiesGVR).Informer(), byName: map[string]versions{}, byTrigger: map[string][]*Policy{}}
		x.policies = idx
		x.registrations = f.ForResource(registrationsGVR).Informer()
		idx.indexed = func() bool { return false }
		if reg, err := idx.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    x.indexPolicy,
			UpdateFunc: func(_, obj any) { x.indexPolicy(obj) },
			DeleteFunc: x.indexPolicy,
		}); err == nil {
			idx.indexed = reg.HasSynced
		}
		_ = idx.informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			x.notServed.Store(apierrors.IsNotFound(err))
			cache.DefaultWatchErrorHandler(ctx, r, err)
		})
		stop := x.Drained
		if stop == nil {
			stop = make(chan struct{})
		}
		go idx.informer.Run(stop)
		go x.registrations.Run(stop)
	})
}

var registrationsGVR = quotav1alpha1.SchemeGroupVersion.WithResource("resourceregistrations")

// Units is what one base unit of a resource type is, as a quantity, when its
// registration declares it: policies' amounts written as quantities are
// converted with it.
func (x *Index) Units(resourceType string) (string, bool) {
	if x.registrations == nil {
		return "", false
	}
	for _, obj := range x.registrations.GetStore().List() {
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

// InForce returns the versions in force of the policies whose trigger is
// group/kind.
func (x *Index) InForce(group, kind string) ([]*Policy, error) {
	return x.lookUp(group, kind, false)
}

// Trials returns the versions on trial (mode Warn or Audit) of the policies
// whose trigger is group/kind: they charge nothing.
func (x *Index) Trials(group, kind string) ([]*Policy, error) {
	return x.lookUp(group, kind, true)
}

func (x *Index) lookUp(group, kind string, trials bool) ([]*Policy, error) {
	x.start()
	// Both the policies, indexed, and the registrations their amounts are
	// converted with: judged before, a create would be admitted without
	// its policy, or charged in the wrong unit.
	loaded := func() bool { return x.policies.indexed() && x.registrations.HasSynced() }
	if !loaded() {
		ctx, cancel := context.WithTimeout(context.Background(), x.Timeout)
		defer cancel()
		err := wait.PollUntilContextCancel(ctx, 5*time.Millisecond, true, func(context.Context) (bool, error) {
			return loaded() || x.notServed.Load(), nil
		})
		if x.notServed.Load() {
			return nil, nil // the CRDs are not installed yet: no policy exists
		}
		if err != nil {
			return nil, errors.New("ClaimCreationPolicies are not loaded yet")
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if trials {
		return x.policies.trials[group+"/"+kind], nil
	}
	return x.policies.byTrigger[group+"/"+kind], nil
}

// indexPolicy keeps the index current as the informer sees a policy change.
func (x *Index) indexPolicy(obj any) {
	obj = reconcile.Unwrap(obj)
	u, ok := obj.(runtime.Unstructured)
	if !ok {
		return
	}
	name := u.(metav1.Object).GetName()
	var v versions
	if _, exists, _ := x.policies.informer.GetStore().Get(obj); exists {
		cp := &quotav1alpha1.ClaimCreationPolicy{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), cp); err == nil {
			v = x.versionsOf(cp)
		}
	}
	var keep []int64
	for _, f := range []*Policy{v.enforcing, v.trial} {
		if f != nil {
			keep = append(keep, f.Generation)
		}
	}
	x.forget(name, keep...)
	x.mu.Lock()
	defer x.mu.Unlock()
	if v.enforcing == nil && v.trial == nil {
		delete(x.policies.byName, name)
	} else {
		x.policies.byName[name] = v
	}
	index, trials := map[string][]*Policy{}, map[string][]*Policy{}
	for _, v := range x.policies.byName {
		if f := v.enforcing; f != nil {
			k := f.Compiled.Group + "/" + f.Compiled.Kind
			index[k] = append(index[k], f)
		}
		if f := v.trial; f != nil {
			k := f.Compiled.Group + "/" + f.Compiled.Kind
			trials[k] = append(trials[k], f)
		}
	}
	for _, m := range []map[string][]*Policy{index, trials} {
		for _, list := range m {
			slices.SortFunc(list, func(a, b *Policy) int { return strings.Compare(a.Name, b.Name) })
		}
	}
	x.policies.byTrigger, x.policies.trials = index, trials
}

type compiledKey struct {
	name       string
	generation int64
	// typed: compiled against the trigger kind's schema (a generation the
	// engine has not judged yet).
	typed bool
}

type compiledEntry struct {
	compiled *policy.Compiled
	err      error
}

// compile compiles one version of a policy, once.
func (x *Index) compile(cp *quotav1alpha1.ClaimCreationPolicy, typed bool) (*policy.Compiled, error) {
	k := compiledKey{cp.Name, cp.Generation, typed}
	x.mu.Lock()
	if e, ok := x.compiled[k]; ok {
		x.mu.Unlock()
		return e.compiled, e.err
	}
	x.mu.Unlock()
	// A generation the engine judged is compiled without the trigger's
	// schema: the engine checked its fields and cost against every served
	// version (status.enforced). One it has not judged yet is checked here
	// against the schema of the version it names, so that a misspelt field
	// is not enforced for the moment before the engine says so (the last
	// valid generation is, meanwhile); what is not checked is bounded by
	// policy.CostLimit at evaluation.
	var o policy.Options
	if typed {
		o.TriggerSchema = x.triggerSchema(cp.Spec.Trigger.Resource)
	}
	c, err := policy.Compile(cp, o)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.compiled[k] = &compiledEntry{compiled: c, err: err}
	return c, err
}

// triggerSchema is the schema of a trigger kind's version, nil when it
// cannot be read (then nothing is checked against it).
func (x *Index) triggerSchema(tr quotav1alpha1.TriggerResource) *spec.Schema {
	x.schemasOnce.Do(func() {
		if x.Kube != nil {
			x.schemas = triggerschema.New(x.Kube.Discovery(), 0)
		}
	})
	if x.schemas == nil {
		return nil
	}
	s, err := x.schemas.Resolve(tr.APIVersion, tr.Kind)
	if err != nil {
		return nil
	}
	return s
}

// forget drops the compiled versions of a policy that are not in force.
func (x *Index) forget(name string, keep ...int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for k := range x.compiled {
		if k.name == name && !containsInt(keep, k.generation) {
			delete(x.compiled, k)
		}
	}
}

func containsInt(list []int64, v int64) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// GroupKind is the trigger kind of the policy in force named name; false
// when none is.
func (x *Index) GroupKind(name string) (group, kind string, ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.policies == nil {
		return "", "", false
	}
	v := x.policies.byName[name]
	f := v.enforcing
	if f == nil {
		f = v.trial
	}
	if f == nil {
		return "", "", false
	}
	return f.Compiled.Group, f.Compiled.Kind, true
}
