package webhook

import (
	"context"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// policySet are the quota plane's ClaimCreationPolicies, read from the
// webhook's cache of them.
type policySet struct {
	list func() []quotav1alpha1.ClaimCreationPolicy
}

// governed are the policies that may charge one kind.
type governed []quotav1alpha1.ClaimCreationPolicy

// governing are the enabled policies whose trigger is kind (any version:
// the quota plane evaluates the version the request came in).
func (s *policySet) governing(kind schema.GroupVersionKind) governed {
	var out governed
	for _, p := range s.list() {
		gv, err := schema.ParseGroupVersion(p.Spec.Trigger.Resource.APIVersion)
		if err != nil || p.Spec.Disabled || gv.Group != kind.Group || p.Spec.Trigger.Resource.Kind != kind.Kind {
			continue
		}
		out = append(out, p)
	}
	return out
}

// kinds are the trigger kinds of every enabled policy, by version named.
func (s *policySet) kinds() []schema.GroupVersionKind {
	seen := map[schema.GroupVersionKind]bool{}
	var out []schema.GroupVersionKind
	for _, p := range s.list() {
		gv, err := schema.ParseGroupVersion(p.Spec.Trigger.Resource.APIVersion)
		if err != nil || p.Spec.Disabled {
			continue
		}
		k := gv.WithKind(p.Spec.Trigger.Resource.Kind)
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

func (g governed) names() []string {
	out := make([]string, len(g))
	for i, p := range g {
		out[i] = p.Name
	}
	return out
}

func allIgnore(g governed) bool {
	for _, p := range g {
		if p.Spec.FailurePolicy != quotav1alpha1.FailurePolicyIgnore {
			return false
		}
	}
	return len(g) > 0
}

// objectWatch is the metadata watch of one governed resource here.
type objectWatch struct {
	gvr      schema.GroupVersionResource
	informer cache.SharedIndexInformer
}

// kindOf is the kind a resource of this cluster serves.
func (w *Webhook) kindOf(gvr schema.GroupVersionResource) (schema.GroupVersionKind, bool) {
	k, err := w.mapper.KindFor(gvr)
	if err != nil {
		w.mapper.Reset()
		if k, err = w.mapper.KindFor(gvr); err != nil {
			return schema.GroupVersionKind{}, false
		}
	}
	return k, true
}

// watchKind starts the metadata watch of a governed kind, once; deleting an
// object of it releases its claims.
func (w *Webhook) watchKind(kind schema.GroupVersionKind) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.watches[kind.GroupKind()]; ok {
		return
	}
	m, err := w.mapper.RESTMapping(kind.GroupKind(), kind.Version)
	if err != nil {
		w.mapper.Reset()
		if m, err = w.mapper.RESTMapping(kind.GroupKind(), kind.Version); err != nil {
			klog.FromContext(w.ctx).Info("A governed kind is not served by this cluster; its objects are not watched", "kind", kind.String(), "err", err.Error())
			return
		}
	}
	inf := metadatainformer.NewFilteredMetadataInformer(w.memberMetadata, m.Resource, metav1.NamespaceAll, 10*time.Minute, cache.Indexers{}, nil).Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if o, ok := obj.(metav1.Object); ok {
			w.releaseObject(string(o.GetUID()), "deleted")
		}
	}})
	w.watches[kind.GroupKind()] = &objectWatch{gvr: m.Resource, informer: inf}
	go inf.Run(w.ctx.Done())
}

// watchAll starts the watch of every kind the policies govern.
func (w *Webhook) watchAll() {
	for _, k := range w.policies.kinds() {
		w.watchKind(k)
	}
}

// synced reports whether every watch has listed its objects.
func (w *Webhook) synced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ow := range w.watches {
		if !ow.informer.HasSynced() {
			return false
		}
	}
	return true
}

// claimsOf are this cluster's claims for one object.
func (w *Webhook) claimsOf(ctx context.Context, uid string) ([]quotav1alpha1.ResourceClaim, error) {
	list := &quotav1alpha1.ResourceClaimList{}
	if err := w.quotaCache.List(ctx, list, client.MatchingFields{indexObjectUID: uid}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// releaseObject deletes the claims of an object that is gone from this
// cluster, releasing its quota.
func (w *Webhook) releaseObject(uid, why string) {
	ctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
	defer cancel()
	claims, err := w.claimsOf(ctx, uid)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Reading the claims of an object", "uid", uid)
		return
	}
	for i := range claims {
		w.deleteClaim(ctx, &claims[i], why)
	}
}

// indexObjectUID indexes claims by the UID of the object they are for.
const indexObjectUID = "objectUID"

func objectUIDIndex(o client.Object) []string {
	if uid := o.GetAnnotations()[quotav1alpha1.AnnotationResourceUID]; uid != "" {
		return []string{uid}
	}
	return nil
}

// watches are the member cluster's watches of governed kinds.
type watches = map[schema.GroupKind]*objectWatch
