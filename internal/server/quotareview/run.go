package quotareview

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/charge"
	"github.com/quotaplane/quotaplane/internal/engine/route"
)

// reviewRun is one review being answered.
type reviewRun struct {
	r       *REST
	p       *charge.Charger
	user    user.Info
	mapper  meta.ResettableRESTMapper
	review  *quotav1alpha1.QuotaReview
	objects []*unstructured.Unstructured

	entries []*entry
	result  route.ReviewResult
	notes   []string
}

// entry is one object of the review.
type entry struct {
	out      quotav1alpha1.QuotaReviewObject
	obj      *unstructured.Unstructured
	mapping  *meta.RESTMapping
	existing *unstructured.Unstructured
	// step is what admission would ask the engine, and stepIndex its
	// place among the steps asked; nil when the object is decided before
	// (refused, or not charged).
	step      *charge.Step
	stepIndex int
	// refusal is the quota refusal's words when the engine did not grant
	// its step.
	refusal string
	// generated: its name was made here from its generateName; it is
	// always a create.
	generated bool
	// admitted is the object as the server's admission chain returns it
	// from a dry run (throughChain): what applying it would store; nil when
	// it could not be dry-run.
	admitted *unstructured.Unstructured
}

var claimKind = quotav1alpha1.SchemeGroupVersion.WithKind("ResourceClaim").GroupKind()

func (rv *reviewRun) run(ctx context.Context) error {
	reset := false
	seen := map[string]int{}
	for i, obj := range rv.objects {
		e := &entry{obj: obj, out: quotav1alpha1.QuotaReviewObject{Index: int32(i), APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind()}}
		rv.entries = append(rv.entries, e)
		gvk := obj.GroupVersionKind()
		m, err := rv.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) && !reset {
			rv.mapper.Reset() // a kind installed since discovery was read
			reset = true
			m, err = rv.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		}
		if err != nil {
			e.refuse(quotav1alpha1.ReviewReasonNotServed, fmt.Sprintf("no kind %q is served in version %q of group %q, so applying it would fail (no matches for kind); install its definition first, or fix apiVersion and kind", gvk.Kind, gvk.Version, gvk.Group))
			continue
		}
		e.mapping = m
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			if obj.GetNamespace() == "" {
				ns := rv.review.Spec.Namespace
				if ns == "" {
					ns = metav1.NamespaceDefault
				}
				obj.SetNamespace(ns)
			}
		} else {
			obj.SetNamespace("")
		}
		e.out.Namespace = obj.GetNamespace()
		if obj.GetName() == "" {
			obj.SetName(obj.GetGenerateName() + rand.String(5))
			e.out.Name, e.generated = obj.GetName(), true
		} else {
			e.out.Name = obj.GetName()
			key := m.Resource.GroupResource().String() + "/" + obj.GetNamespace() + "/" + obj.GetName()
			if j, dup := seen[key]; dup {
				e.refuse(quotav1alpha1.ReviewReasonDuplicate, fmt.Sprintf("objects[%d] is the same %s; applying both would apply this one as a change of that one: review each version apart, or keep one", j, obj.GetKind()))
				continue
			}
			seen[key] = i
			if err := rv.authorize(ctx, e, "get"); err != nil {
				continue
			}
		}
	}
	if err := rv.lookUp(ctx); err != nil {
		return err
	}
	var items []charge.ReviewItem
	var asked []*entry
	for _, e := range rv.entries {
		if e.out.Result != "" {
			continue
		}
		e.out.Operation = "Create"
		verb := "create"
		if e.existing != nil {
			e.out.Operation, verb = "Update", "patch"
		}
		_ = rv.authorize(ctx, e, verb)
	}
	if err := rv.throughChain(ctx); err != nil {
		return err
	}
	for _, e := range rv.entries {
		if e.out.Result != "" {
			continue
		}
		if it, ok := rv.item(e); ok {
			items, asked = append(items, it), append(asked, e)
		}
	}
	az := rv.r.RootAuthorizer
	if az == nil {
		az = rv.r.Authorizer
	}
	reviewed, res, err := rv.p.Review(ctx, az, rv.user, items)
	if err != nil {
		return err
	}
	rv.result = res
	for i, e := range asked {
		switch r := reviewed[i]; {
		case r.Refused != nil:
			rv.refused(e, r.Refused)
		case !r.Step.Asked:
			e.out.Result = quotav1alpha1.ReviewNotCharged
		default:
			e.step, e.stepIndex, e.refusal = r.Step, r.Index, r.Refusal
		}
	}
	rv.decided()
	return nil
}

func (e *entry) refuse(reason, msg string) {
	e.out.Result, e.out.Reason, e.out.Message = quotav1alpha1.ReviewRefused, reason, msg
}

// authorize asks whether the reviewed user may verb the object, as its
// apply would be asked; a denial refuses it with the API server's words.
func (rv *reviewRun) authorize(ctx context.Context, e *entry, verb string) error {
	gvr := e.mapping.Resource
	attrs := authorizer.AttributesRecord{User: rv.user, Verb: verb, APIGroup: gvr.Group, APIVersion: gvr.Version, Resource: gvr.Resource,
		Namespace: e.obj.GetNamespace(), Name: e.obj.GetName(), ResourceRequest: true}
	if verb == "create" {
		attrs.Name = ""
	}
	d, reason, err := rv.r.Authorizer.Authorize(ctx, attrs)
	if d == authorizer.DecisionAllow {
		return nil
	}
	where := ""
	if e.obj.GetNamespace() != "" {
		where = fmt.Sprintf(" in the namespace %q", e.obj.GetNamespace())
	}
	msg := fmt.Sprintf("User %q cannot %s resource %q in API group %q%s", rv.user.GetName(), verb, gvr.Resource, gvr.Group, where)
	if reason != "" {
		msg += ": " + reason
	} else if err != nil {
		msg += ": " + err.Error()
	}
	refusal := apierrors.NewForbidden(gvr.GroupResource(), e.obj.GetName(), fmt.Errorf("%s", msg))
	e.refuse(quotav1alpha1.ReviewReasonForbidden, refusal.Error())
	return refusal
}

// item is one object as its create or update would reach admission, for
// the charging component's steps in Review mode; false when it is refused
// here already.
func (rv *reviewRun) item(e *entry) (charge.ReviewItem, bool) {
	gvk := e.obj.GroupVersionKind()
	gvr := e.mapping.Resource
	obj, old := e.obj.DeepCopy(), (*unstructured.Unstructured)(nil)
	op := admission.Create
	var opts runtime.Object = &metav1.CreateOptions{}
	if e.existing != nil {
		op, old = admission.Update, e.existing
		obj = applied(e.existing, e.obj)
		if e.admitted != nil {
			obj = e.admitted.DeepCopy()
		}
		opts = &metav1.PatchOptions{}
	} else {
		if e.admitted != nil {
			obj = e.admitted.DeepCopy()
		}
		obj.SetUID(types.UID(uuid.NewUUID()))
		obj.SetCreationTimestamp(metav1.NewTime(time.Now()))
		obj.SetResourceVersion("")
	}
	var oldObj runtime.Object
	if old != nil {
		oldObj = old
	}
	it := charge.ReviewItem{
		Attributes: admission.NewAttributesRecord(obj, oldObj, gvk, obj.GetNamespace(), obj.GetName(), gvr, "", op, opts, false, rv.user),
		Objects:    objectInterfaces(),
		Info: &genericapirequest.RequestInfo{IsResourceRequest: true, Verb: "create", APIGroup: gvr.Group, APIVersion: gvr.Version,
			Namespace: obj.GetNamespace(), Resource: gvr.Resource, Parts: []string{gvr.Resource}},
	}
	if op == admission.Update {
		it.Info.Verb, it.Info.Name, it.Info.Parts = "patch", obj.GetName(), []string{gvr.Resource, obj.GetName()}
	}
	if gvk.GroupKind() == claimKind && op == admission.Create {
		// A ResourceClaim of the review is charged as itself.
		c := &quotav1alpha1.ResourceClaim{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, c); err != nil {
			e.refuse(quotav1alpha1.ReviewReasonInvalid, fmt.Sprintf("the ResourceClaim cannot be read: %v", err))
			return it, false
		}
		it.Claim = c
	}
	return it, true
}

// refused records admission's refusal of an object (an answer that is no
// refusal, the engine or a read not answering, failed the review in
// charge.Charger.Review).
func (rv *reviewRun) refused(e *entry, err error) {
	st, ok := err.(apierrors.APIStatus)
	if !ok {
		e.refuse(quotav1alpha1.ReviewReasonInvalid, err.Error())
		return
	}
	switch st.Status().Code {
	case 403:
		e.refuse(quotav1alpha1.ReviewReasonForbidden, err.Error())
	case 409:
		e.refuse(quotav1alpha1.ReviewReasonNameTaken, err.Error())
	default:
		e.refuse(quotav1alpha1.ReviewReasonInvalid, err.Error())
	}
}

// objectInterfaces are what admission is given: an empty scheme's (the
// plugin reads the unstructured objects as they are).
func objectInterfaces() admission.ObjectInterfaces {
	return admission.NewObjectInterfacesFromScheme(runtime.NewScheme())
}

// applied is the object as applying manifest to existing would leave it:
// the manifest's fields over the existing object's (maps merged, anything
// else replaced), its identity and status the existing object's.
func applied(existing, manifest *unstructured.Unstructured) *unstructured.Unstructured {
	out := existing.DeepCopy()
	for k, v := range manifest.Object {
		if k == "status" {
			continue
		}
		if k == "metadata" {
			m, _ := v.(map[string]any)
			for _, f := range []string{"labels", "annotations"} {
				if add, ok := m[f].(map[string]any); ok {
					cur, _, _ := unstructured.NestedMap(out.Object, "metadata", f)
					_ = unstructured.SetNestedMap(out.Object, merge(cur, add), "metadata", f)
				}
			}
			continue
		}
		out.Object[k] = mergeValue(out.Object[k], v)
	}
	return out
}

func mergeValue(cur, add any) any {
	cm, ok1 := cur.(map[string]any)
	am, ok2 := add.(map[string]any)
	if ok1 && ok2 {
		return merge(cm, am)
	}
	return runtime.DeepCopyJSONValue(add)
}

func merge(cur, add map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range cur {
		out[k] = v
	}
	for k, v := range add {
		out[k] = mergeValue(out[k], v)
	}
	return out
}

// groupKey groups the objects read together.
type groupKey struct {
	gvr schema.GroupVersionResource
	ns  string
}
