// Package claimpolicy is the admission plugin of quotaplane serve that
// enforces ClaimCreationPolicies: for each create of a kind a Ready policy
// names, it renders the policy's ResourceClaim and asks the in-process quota
// engine to decide it before the object is stored.
//
// It decides nothing itself: the engine decides, internal/policy evaluates
// the CEL. Its job is to turn the outcome into the right answer: 403 for a
// quota denial, 504 when the engine cannot decide in time, 500 naming the
// policy when a policy cannot be evaluated.
package claimpolicy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/policy"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// PluginName is the admission plugin's name.
const PluginName = "QuotaClaimPolicy"

// decideTimeout bounds how long a create waits for the engine.
const decideTimeout = 10 * time.Second

// Register adds the plugin, bound to this process's engine.
func Register(plugins *admission.Plugins, handle *engine.Handle, systemNamespace string) {
	plugins.Register(PluginName, func(io.Reader) (admission.Interface, error) {
		return &Plugin{Handler: admission.NewHandler(admission.Create), handle: handle, systemNamespace: systemNamespace,
			compiled: map[string]*compiledEntry{}}, nil
	})
}

// Plugin enforces ClaimCreationPolicies at admission.
type Plugin struct {
	*admission.Handler
	handle          *engine.Handle
	systemNamespace string
	dynamic         dynamic.Interface
	kube            kubernetes.Interface
	drained         <-chan struct{}

	startOnce sync.Once
	policies  cache.SharedIndexInformer
	// notServed is set while listing policies answers NotFound: the CRD is
	// not installed yet, so no policy can exist.
	notServed atomic.Bool
	mu        sync.Mutex
	compiled  map[string]*compiledEntry // by policy name

	// byTrigger indexes the policies by trigger group/kind, converted once
	// per change of a policy rather than on every create.
	byTrigger atomic.Pointer[map[string][]*quotav1alpha1.ClaimCreationPolicy]
	indexMu   sync.Mutex
	byName    map[string]*quotav1alpha1.ClaimCreationPolicy
}

type compiledEntry struct {
	generation int64
	compiled   *policy.Compiled
	err        error
}

var (
	_           admission.ValidationInterface          = &Plugin{}
	_           initializer.WantsDynamicClient         = &Plugin{}
	_           initializer.WantsExternalKubeClientSet = &Plugin{}
	_           admission.InitializationValidator      = &Plugin{}
	policiesGVR                                        = quotav1alpha1.SchemeGroupVersion.WithResource("claimcreationpolicies")
)

// SetDrainedNotification implements initializer.WantsDrainedNotification:
// the policy watch stops when the server drains, so shutdown never waits on it.
func (p *Plugin) SetDrainedNotification(ch <-chan struct{}) { p.drained = ch }

// SetDynamicClient implements initializer.WantsDynamicClient.
func (p *Plugin) SetDynamicClient(c dynamic.Interface) { p.dynamic = c }

// SetExternalKubeClientSet implements initializer.WantsExternalKubeClientSet.
func (p *Plugin) SetExternalKubeClientSet(c kubernetes.Interface) { p.kube = c }

// ValidateInitialization implements admission.InitializationValidator.
func (p *Plugin) ValidateInitialization() error {
	if p.dynamic == nil || p.handle == nil {
		return fmt.Errorf("%s needs a dynamic client and the engine handle", PluginName)
	}
	return nil
}

// start begins watching policies on first use (the server serves by then).
func (p *Plugin) start() {
	p.startOnce.Do(func() {
		f := dynamicinformer.NewDynamicSharedInformerFactory(p.dynamic, 0)
		p.policies = f.ForResource(policiesGVR).Informer()
		p.byName = map[string]*quotav1alpha1.ClaimCreationPolicy{}
		p.byTrigger.Store(&map[string][]*quotav1alpha1.ClaimCreationPolicy{})
		_, _ = p.policies.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    p.indexPolicy,
			UpdateFunc: func(_, obj any) { p.indexPolicy(obj) },
			DeleteFunc: p.indexPolicy,
		})
		_ = p.policies.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			p.notServed.Store(apierrors.IsNotFound(err))
			cache.DefaultWatchErrorHandler(ctx, r, err)
		})
		stop := p.drained
		if stop == nil {
			stop = make(chan struct{})
		}
		go p.policies.Run(stop)
	})
}

// matching returns the Ready, enabled policies whose trigger is group/kind.
func (p *Plugin) matching(group, kind string) ([]*quotav1alpha1.ClaimCreationPolicy, error) {
	p.start()
	if !p.policies.HasSynced() {
		ctx, cancel := context.WithTimeout(context.Background(), decideTimeout)
		defer cancel()
		err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
			return p.policies.HasSynced() || p.notServed.Load(), nil
		})
		if p.notServed.Load() {
			return nil, nil // the CRDs are not installed yet: no policy exists
		}
		if err != nil {
			return nil, errors.New("ClaimCreationPolicies are not loaded yet")
		}
	}
	var out []*quotav1alpha1.ClaimCreationPolicy
	for _, cp := range (*p.byTrigger.Load())[group+"/"+kind] {
		if cp.Spec.Disabled {
			continue
		}
		ready := meta.FindStatusCondition(cp.Status.Conditions, quotav1alpha1.PolicyConditionReady)
		if ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != cp.Generation {
			continue // a broken, or not yet validated, policy never yields a quota denial
		}
		out = append(out, cp)
	}
	return out, nil
}

// indexPolicy keeps byTrigger current as the informer sees a policy change.
func (p *Plugin) indexPolicy(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(runtime.Unstructured)
	if !ok {
		return
	}
	p.indexMu.Lock()
	defer p.indexMu.Unlock()
	name := u.(metav1.Object).GetName()
	if _, exists, _ := p.policies.GetStore().Get(obj); !exists {
		delete(p.byName, name)
	} else {
		cp := &quotav1alpha1.ClaimCreationPolicy{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), cp); err != nil {
			delete(p.byName, name)
		} else {
			p.byName[name] = cp
		}
	}
	index := map[string][]*quotav1alpha1.ClaimCreationPolicy{}
	for _, cp := range p.byName {
		k := triggerGroup(cp) + "/" + cp.Spec.Trigger.Resource.Kind
		index[k] = append(index[k], cp)
	}
	for _, list := range index {
		slices.SortFunc(list, func(a, b *quotav1alpha1.ClaimCreationPolicy) int { return strings.Compare(a.Name, b.Name) })
	}
	p.byTrigger.Store(&index)
}

func triggerGroup(cp *quotav1alpha1.ClaimCreationPolicy) string {
	if i := strings.Index(cp.Spec.Trigger.Resource.APIVersion, "/"); i >= 0 {
		return cp.Spec.Trigger.Resource.APIVersion[:i]
	}
	return ""
}

func (p *Plugin) compile(cp *quotav1alpha1.ClaimCreationPolicy) (*policy.Compiled, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.compiled[cp.Name]; ok && e.generation == cp.Generation {
		return e.compiled, e.err
	}
	c, err := policy.Compile(cp)
	p.compiled[cp.Name] = &compiledEntry{generation: cp.Generation, compiled: c, err: err}
	return c, err
}

// exempt groups are never charged: the quota API itself, and CRDs (installing
// the quota CRDs must never wait for quota).
var exempt = map[string]bool{quotav1alpha1.GroupName: true, "apiextensions.k8s.io": true}

// Validate decides the quota of a create.
func (p *Plugin) Validate(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	if a.GetOperation() != admission.Create || a.GetSubresource() != "" || exempt[a.GetResource().Group] {
		return nil
	}
	kind := a.GetKind()
	policies, err := p.matching(kind.Group, kind.Kind)
	if err != nil {
		return apierrors.NewTimeoutError(fmt.Sprintf("quota for this %s cannot be decided yet: %v; retry", kind.Kind, err), 1)
	}
	if len(policies) == 0 {
		return nil
	}
	// Policies see the object as the client sent it (its versioned form),
	// not the server's internal form.
	versioned, err := admission.NewVersionedAttributes(a, kind, o)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("reading the %s for quota: %w", kind.Kind, err))
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(versioned.VersionedObject)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("reading the %s for quota: %w", kind.Kind, err))
	}
	objMeta, err := meta.Accessor(versioned.VersionedObject)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	in := policy.Input{Object: obj, User: userMap(a), RequestInfo: requestInfoMap(a)}
	var claims []*quotav1alpha1.ResourceClaim
	var failOpen []string
	for _, cp := range policies {
		compiled, err := p.compile(cp)
		if err == nil {
			var ok bool
			var rendered *policy.Rendered
			ok, rendered, err = compiled.Evaluate(in)
			if err == nil && ok {
				claims = append(claims, p.claimFor(cp, rendered, a, objMeta))
				continue
			}
		}
		if err != nil {
			if cp.Spec.FailurePolicy == quotav1alpha1.FailurePolicyIgnore {
				failOpen = append(failOpen, cp.Name)
				continue
			}
			return apierrors.NewInternalError(fmt.Errorf("ClaimCreationPolicy %s could not be evaluated for %s %s: %v; fix the policy (this is not a quota denial)", cp.Name, kind.Kind, a.GetName(), err))
		}
	}
	for _, name := range failOpen {
		_ = a.AddAnnotation("quota.miloapis.com/fail-open", "ClaimCreationPolicy "+name+" could not be evaluated and is fail-open (failurePolicy: Ignore)")
	}
	if len(claims) == 0 {
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, decideTimeout)
	defer cancel()
	res, err := p.handle.Admit(dctx, claims, a.IsDryRun())
	if err != nil {
		if ignoreAll(policies) {
			_ = a.AddAnnotation("quota.miloapis.com/fail-open", fmt.Sprintf("quota could not be decided (%v); admitted because every matching policy is fail-open", err))
			return nil
		}
		msg := fmt.Sprintf("quota for this %s could not be decided within %s: %v; the %s was not created and any quota held for it is released within seconds, retry the request", kind.Kind, decideTimeout, err, kind.Kind)
		if errors.Is(err, engine.ErrNotLeader) {
			msg = fmt.Sprintf("quota for this %s cannot be decided right now (%v); nothing was consumed, retry in a few seconds", kind.Kind, err)
		}
		return apierrors.NewTimeoutError(msg, 2)
	}
	if res.Granted {
		return nil
	}
	for i, d := range res.Decisions {
		if d.Outcome == quota.ValidationFailed {
			return apierrors.NewInternalError(fmt.Errorf("ClaimCreationPolicy %s renders a claim for this %s that the registrations refuse: %s; fix the policy or the ResourceRegistration (this is not a quota denial)",
				claims[i].Annotations[engine.AnnotationPolicy], kind.Kind, d.Message))
		}
	}
	msg := denialMessage(kind.Kind, a.GetName(), res)
	p.recordDenial(ctx, policies, msg)
	return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), errors.New(msg))
}

func ignoreAll(policies []*quotav1alpha1.ClaimCreationPolicy) bool {
	for _, cp := range policies {
		if cp.Spec.FailurePolicy != quotav1alpha1.FailurePolicyIgnore {
			return false
		}
	}
	return true
}

// denialMessage names the resource type, requested, available, limit and
// consumer of the first denied request.
func denialMessage(kind, name string, res engine.AdmitResult) string {
	// The request that is short, not a claim undone because another was.
	for _, d := range res.Decisions {
		for _, r := range d.Requests {
			if r.Reason == quota.ReasonQuotaExceeded {
				return fmt.Sprintf("insufficient quota to create %s %s: %s", kind, name, d.Message)
			}
		}
	}
	for _, d := range res.Decisions {
		if d.Outcome != quota.Granted && d.Outcome != quota.Pending {
			return fmt.Sprintf("insufficient quota to create %s %s: %s", kind, name, d.Message)
		}
	}
	return fmt.Sprintf("insufficient quota to create %s %s", kind, name)
}

func (p *Plugin) claimFor(cp *quotav1alpha1.ClaimCreationPolicy, r *policy.Rendered, a admission.Attributes, obj metav1.Object) *quotav1alpha1.ResourceClaim {
	ns := a.GetNamespace()
	if ns == "" {
		ns = p.systemNamespace
	}
	md := cp.Spec.Target.ResourceClaimTemplate.Metadata
	if md.Namespace != "" && !strings.Contains(md.Namespace, "{{") {
		ns = md.Namespace
	}
	// The claim's name is fixed now (it is recorded before the claim exists):
	// the template's name, or a prefix and a hash of the object and policy.
	sum := sha256.Sum256([]byte(string(obj.GetUID()) + "/" + cp.Name))
	suffix := hex.EncodeToString(sum[:5])
	name := r.Name
	if name == "" {
		prefix := r.GenerateName
		if prefix == "" {
			prefix = strings.ToLower(a.GetKind().Kind) + "-" + obj.GetName() + "-"
		}
		if len(prefix) > 200 {
			prefix = prefix[:200]
		}
		name = prefix + suffix
	}
	c := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: name,
		Labels: map[string]string{},
		Annotations: map[string]string{
			engine.AnnotationPolicy:      cp.Name,
			engine.AnnotationResource:    engine.FormatGVR(a.GetResource()),
			engine.AnnotationResourceUID: string(obj.GetUID()),
		},
	}, Spec: r.Spec}
	for k, v := range md.Labels {
		c.Labels[k] = v
	}
	for k, v := range md.Annotations {
		c.Annotations[k] = v
	}
	kind := a.GetKind()
	c.Spec.ResourceRef = &quotav1alpha1.ResourceRef{APIGroup: kind.Group, Kind: kind.Kind, Name: obj.GetName(), Namespace: a.GetNamespace()}
	return c
}

// recordDenial records the refusal as an Event on each policy.
func (p *Plugin) recordDenial(ctx context.Context, policies []*quotav1alpha1.ClaimCreationPolicy, msg string) {
	if p.kube == nil {
		return
	}
	now := metav1.NewTime(time.Now())
	for _, cp := range policies {
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{GenerateName: cp.Name + "-", Namespace: metav1.NamespaceDefault},
			InvolvedObject: corev1.ObjectReference{APIVersion: quotav1alpha1.SchemeGroupVersion.String(), Kind: "ClaimCreationPolicy", Name: cp.Name, UID: cp.UID},
			Reason:         "QuotaExceeded", Message: truncate(msg, 1024), Type: corev1.EventTypeWarning,
			FirstTimestamp: now, LastTimestamp: now, Count: 1,
			Source: corev1.EventSource{Component: "quotaplane-admission"},
		}
		go func() {
			if _, err := p.kube.CoreV1().Events(ev.Namespace).Create(context.Background(), ev, metav1.CreateOptions{}); err != nil {
				klog.FromContext(ctx).V(2).Info("Recording a quota denial event failed", "err", err)
			}
		}()
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

func userMap(a admission.Attributes) map[string]any {
	u := a.GetUserInfo()
	if u == nil {
		return map[string]any{}
	}
	extra := map[string]any{}
	for k, v := range u.GetExtra() {
		extra[k] = append([]string(nil), v...)
	}
	return map[string]any{"name": u.GetName(), "uid": u.GetUID(), "groups": append([]string(nil), u.GetGroups()...), "extra": extra}
}

func requestInfoMap(a admission.Attributes) map[string]any {
	r := a.GetResource()
	return map[string]any{
		"verb": strings.ToLower(string(a.GetOperation())), "namespace": a.GetNamespace(), "name": a.GetName(),
		"apiGroup": r.Group, "apiVersion": r.Version, "resource": r.Resource, "subresource": a.GetSubresource(),
		"dryRun": a.IsDryRun(),
	}
}
