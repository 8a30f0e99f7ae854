package walk

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/charge"
	"github.com/quotaplane/quotaplane/internal/kinds"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/policy"
	"github.com/quotaplane/quotaplane/internal/policy/governed"
)

// pageSize is how many objects one list request returns.
const pageSize = 500

// Reasons an object is not charged, as status.impact counts them.
const (
	ReasonEvaluationFailed = "EvaluationFailed"
	ReasonInvalidClaim     = "InvalidClaim"
	ReasonNoConsumer       = "NoConsumer"
	ReasonNamespaceNotOpen = "NamespaceNotOpen"
	ReasonNamespaceLabels  = "NamespaceLabelsUnread"
)

// Walker lists the objects of a trigger kind and renders their claims. Its
// dependencies are fields so that it is built wherever the clients are: on
// the engine's leader, and in every replica's QuotaReview.
type Walker struct {
	// Mapper finds the resource of a trigger kind.
	Mapper meta.ResettableRESTMapper
	// Dynamic lists the root's objects.
	Dynamic dynamic.Interface
	// Planes lists the control planes whose objects are charged as the
	// root's are (nil: the root only); PlaneDynamic lists a plane's objects.
	Planes       func(ctx context.Context) ([]planes.Listed, error)
	PlaneDynamic func(p planes.Plane) (dynamic.Interface, error)
	// NamespaceOpen says why a namespace cannot hold claims, nil when it can.
	NamespaceOpen func(ctx context.Context, ns string) error
	// Units converts amounts written as quantities.
	Units policy.Units
	// SystemNamespace holds claims of cluster-scoped objects.
	SystemNamespace string
	// Exemptions are the objects no policy charges (the same as admission's).
	Exemptions governed.Exemptions

	validatorOnce sync.Once
	validator     *charge.Validator
	validatorErr  error
	// nsLabels are namespaces' labels read for namespace selectors, by
	// name, each kept for nsLabelsFor.
	nsLabels sync.Map
}

// Version is the version of a policy walked.
type Version struct {
	Name       string
	Generation int64
	Trigger    quotav1alpha1.Trigger
	Target     quotav1alpha1.ClaimTarget
}

// Kind is what a walk lists: the trigger's resource; empty when the kind is
// not served (no object of it exists).
type Kind struct {
	GVR schema.GroupVersionResource
	GVK schema.GroupVersionKind
}

// Source is where objects are listed: the root, or one control plane.
type Source struct {
	dyn   dynamic.Interface
	Plane *planes.Plane
}

// Where names the plane after an object's name in a message.
func (s Source) Where() string {
	if s.Plane == nil {
		return ""
	}
	return " in control plane " + s.Plane.String()
}

// Compile compiles a version as the engine judged it (no schema).
func Compile(v Version) (*policy.Compiled, error) {
	return policy.Compile(&quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: v.Name, Generation: v.Generation},
		Spec: quotav1alpha1.ClaimCreationPolicySpec{Trigger: v.Trigger, Target: v.Target}}, policy.Options{})
}

// KindOf resolves a trigger's kind to its resource.
func (w *Walker) KindOf(ctx context.Context, tr quotav1alpha1.TriggerResource) (Kind, error) {
	gv, err := schema.ParseGroupVersion(tr.APIVersion)
	if err != nil {
		return Kind{}, fmt.Errorf("spec.trigger.resource.apiVersion: %w", err)
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: tr.Kind}
	gvr, err := kinds.ResourceFor(ctx, w.Mapper, w.Dynamic, gk, "")
	if err != nil || gvr.Empty() {
		return Kind{}, err
	}
	return Kind{GVR: gvr, GVK: gvr.GroupVersion().WithKind(gk.Kind)}, nil
}

// Sources are the root and every served control plane that stores its own
// objects of gr (docs/control-planes.md); unexamined names the planes not
// served. A plane whose owner is being deleted is not listed: its removal
// deletes its objects and releases their claims.
func (w *Walker) Sources(ctx context.Context, gr schema.GroupResource) (out []Source, unexamined []string, err error) {
	out = []Source{{dyn: w.Dynamic}}
	if w.Planes == nil || !planes.OwnStorage(gr) {
		return out, nil, nil
	}
	listed, err := w.Planes(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, l := range listed {
		if !l.Served {
			unexamined = append(unexamined, l.Plane.String()+": "+l.NotServed)
			continue
		}
		dyn, err := w.PlaneDynamic(l.Plane)
		if err != nil {
			return nil, nil, err
		}
		plane := l.Plane
		out = append(out, Source{dyn: dyn, Plane: &plane})
	}
	return out, unexamined, nil
}

// Each calls do for every object of gvr the source stores, page by page.
// A plane that answers 404 is gone (its owner deleted since it was listed):
// it has no objects.
func (s Source) Each(ctx context.Context, gvr schema.GroupVersionResource, do func(*unstructured.Unstructured) error) error {
	opts := metav1.ListOptions{Limit: pageSize}
	for {
		list, err := s.dyn.Resource(gvr).List(ctx, opts)
		if s.Plane != nil && apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("listing %s%s: %w", gvr.GroupResource(), s.Where(), err)
		}
		for i := range list.Items {
			if err := do(&list.Items[i]); err != nil {
				return err
			}
		}
		if list.GetContinue() == "" {
			return nil
		}
		opts.Continue = list.GetContinue()
	}
}

// Refusal says why an object the policy may govern is not charged.
type Refusal struct {
	// Reason is one of the Reason constants.
	Reason string
	// Why says it for a person.
	Why string
	// Eval is set when the policy could not be evaluated for the object.
	Eval *policy.EvalError
}

// ClaimFor is the claim version v renders for obj as if it were being
// created now, nil when the policy does not govern it; a non-nil Refusal
// says what stops it from being charged. open caches NamespaceOpen for one
// walk.
func (w *Walker) ClaimFor(ctx context.Context, v Version, compiled *policy.Compiled, k Kind, plane *planes.Plane,
	obj *unstructured.Unstructured, open map[string]error) (*quotav1alpha1.ResourceClaim, *Refusal) {
	gvk, gvr := k.GVK, k.GVR
	if w.Exemptions.Exempt(gvk.GroupKind(), obj.GetNamespace(), obj.GetName(), plane != nil) {
		return nil, nil // quotaplane's own, or the cluster's: never governed
	}
	out, err := w.Exemptions.OutOfScope(compiled.NamespaceSelector, gvk.GroupKind(), obj.GetNamespace(), obj.GetName(), plane != nil, func(ns string) (labels.Set, error) {
		if gvk.Group == "" && gvk.Kind == "Namespace" {
			return governed.NamespaceLabels(ns, obj.GetLabels()), nil
		}
		return w.namespaceLabels(ctx, ns)
	})
	if err != nil {
		return nil, &Refusal{Reason: ReasonNamespaceLabels, Why: "the labels of its namespace, which the policy's namespaceSelector reads, cannot be read: " + err.Error()}
	}
	if out {
		return nil, nil // outside the policy's namespaces
	}
	in := policy.Input{Object: obj.Object, User: map[string]any{"name": "", "uid": "", "groups": []string{}, "extra": map[string]any{}},
		RequestInfo: map[string]any{"verb": "create", "namespace": obj.GetNamespace(), "name": obj.GetName(), "apiGroup": gvr.Group,
			"apiVersion": gvr.Version, "resource": gvr.Resource, "subresource": "", "dryRun": false},
		Units: w.Units}
	applies, rendered, err := compiled.Evaluate(in)
	if err != nil {
		r := &Refusal{Reason: ReasonEvaluationFailed, Why: "the policy cannot be evaluated for it: " + err.Error()}
		if ee := (*policy.EvalError)(nil); errors.As(err, &ee) {
			r.Eval = ee
		}
		return nil, r
	}
	if !applies {
		return nil, nil
	}
	w.validatorOnce.Do(func() { w.validator, w.validatorErr = charge.NewValidator() })
	if w.validatorErr != nil {
		return nil, &Refusal{Reason: ReasonInvalidClaim, Why: "claims cannot be checked: " + w.validatorErr.Error()}
	}
	res := charge.RenderClaim(charge.ClaimSource{Policy: v.Name, Generation: v.Generation, Kind: gvk, Resource: gvr,
		Namespace: obj.GetNamespace(), Object: obj, SystemNamespace: w.SystemNamespace, Plane: plane}, rendered, w.validator)
	claim := res.Claim
	switch res.Problem {
	case charge.NoConsumer:
		return nil, &Refusal{Reason: ReasonNoConsumer, Why: "the policy has no spec.target.resourceClaimTemplate.spec.consumerRef, and an object at the root control plane belongs to no project to charge: give the policy a consumerRef"}
	case charge.PlaneConsumer:
		return nil, &Refusal{Reason: ReasonInvalidClaim, Why: fmt.Sprintf("the policy charges it to %s, and %v; %s", ConsumerText(claim.Spec.ConsumerRef), res.Err, governed.PlaneConsumerRemedy(*plane))}
	case charge.Invalid:
		return nil, &Refusal{Reason: ReasonInvalidClaim, Why: "the policy renders a claim the API server would refuse: " + res.Errs.ToAggregate().Error()}
	}
	err, seen := open[claim.Namespace]
	if !seen && w.NamespaceOpen != nil {
		err = w.NamespaceOpen(ctx, claim.Namespace)
		open[claim.Namespace] = err
	}
	if err != nil {
		return nil, &Refusal{Reason: ReasonNamespaceNotOpen, Why: fmt.Sprintf("its claim goes in namespace %s, which %v", claim.Namespace, err)}
	}
	return claim, nil
}

// ObjectName is how a message names an object: Kind [namespace/]name.
func ObjectName(kind, ns, name string) string {
	if ns == "" {
		return kind + " " + name
	}
	return kind + " " + ns + "/" + name
}

// ConsumerText is how a reason names a consumer: Kind [namespace/]name.
func ConsumerText(c quotav1alpha1.ConsumerRef) string {
	if c.Namespace == "" {
		return c.Kind + " " + c.Name
	}
	return c.Kind + " " + c.Namespace + "/" + c.Name
}

// nsLabelsFor is how long a namespace's labels read for a walk are used.
const nsLabelsFor = 10 * time.Second

type readLabels struct {
	set labels.Set
	at  time.Time
}

// namespaceLabels reads a root namespace's labels, as a namespace selector
// matches them; a namespace that does not exist has its name label alone.
func (w *Walker) namespaceLabels(ctx context.Context, ns string) (labels.Set, error) {
	if v, ok := w.nsLabels.Load(ns); ok && time.Since(v.(readLabels).at) < nsLabelsFor {
		return v.(readLabels).set, nil
	}
	u, err := w.Dynamic.Resource(corev1.SchemeGroupVersion.WithResource("namespaces")).Get(ctx, ns, metav1.GetOptions{})
	set, err := governed.ReadNamespaceLabels(ns, u, err)
	if err != nil {
		return nil, err
	}
	w.nsLabels.Store(ns, readLabels{set: set, at: time.Now()})
	return set, nil
}
