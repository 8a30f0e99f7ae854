package collect

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// resource is a resource stored in planes, as discovery names it.
type resource struct {
	gvr        schema.GroupVersionResource
	namespaced bool
}

// object is what a pass knows of a stored object of a plane.
type object struct {
	res  resource
	meta metav1.ObjectMeta
}

// snapshot is what a pass read of a plane, or of one namespace of it.
type snapshot struct {
	// scope is the namespace read, "" for the whole plane.
	scope string
	// objects of every namespaced resource (in scope), and of every
	// cluster-scoped one but Namespaces when scope is "".
	objects []object
	// namespaces read after the objects: every namespace of the plane, or
	// only scope (absent when it does not exist).
	namespaces map[string]*corev1.Namespace
}

type stepKind int

const (
	// deleteObject deletes obj with propagation, its UID as precondition.
	deleteObject stepKind = iota
	// dropFinalizer removes finalizer from obj (at its resourceVersion).
	dropFinalizer
	// dropOwners removes the ownerReferences to owners from obj.
	dropOwners
	// checkOwners reads owners (not in the snapshot) through the plane;
	// obj is deleted when none exists, otherwise the absent ones are
	// dropped from it.
	checkOwners
	// finalizeNamespace removes the kubernetes finalizer from ns, which
	// then goes.
	finalizeNamespace
)

// step is one change a pass makes.
type step struct {
	kind        stepKind
	obj         *object
	ns          *corev1.Namespace
	propagation metav1.DeletionPropagation
	finalizer   string
	owners      []metav1.OwnerReference
	// why is said in the log.
	why string
}

// plan is what a pass over s does, in order, and whether the pass must be
// repeated once those are done (something is waited for: a namespace's
// contents, blocking dependents, dependents losing their owner).
func plan(s snapshot) (steps []step, again bool) {
	live := map[types.UID]bool{}
	for i := range s.objects {
		live[s.objects[i].meta.UID] = true
	}
	for _, ns := range s.namespaces {
		live[ns.UID] = true
	}
	dependents := map[types.UID][]int{}
	for i := range s.objects {
		for _, ref := range s.objects[i].meta.OwnerReferences {
			dependents[ref.UID] = append(dependents[ref.UID], i)
		}
	}
	inUse := map[string]bool{}
	for i := range s.objects {
		o := &s.objects[i]
		m := &o.meta
		if o.res.namespaced {
			inUse[m.Namespace] = true
			ns, found := s.namespaces[m.Namespace]
			switch {
			case !found:
				// Its namespace is gone (deleted before namespaces were
				// finalized in planes, or while it was being created).
				if m.DeletionTimestamp == nil {
					steps = append(steps, step{kind: deleteObject, obj: o, propagation: metav1.DeletePropagationBackground, why: "its namespace does not exist"})
				}
				again = true
				continue
			case ns.DeletionTimestamp != nil:
				if m.DeletionTimestamp == nil {
					steps = append(steps, step{kind: deleteObject, obj: o, propagation: metav1.DeletePropagationBackground, why: "its namespace is being deleted"})
				}
				again = true
				// Its own finalizers are still honoured below.
			}
		}
		if m.DeletionTimestamp != nil {
			more, wait := owner(s.objects, o, dependents[m.UID])
			steps, again = append(steps, more...), again || wait
			continue
		}
		var absent []metav1.OwnerReference
		for _, ref := range m.OwnerReferences {
			if !live[ref.UID] {
				absent = append(absent, ref)
			}
		}
		if len(absent) > 0 {
			steps = append(steps, step{kind: checkOwners, obj: o, owners: absent, why: "an owner was not found"})
		}
	}
	names := make([]string, 0, len(s.namespaces))
	for n := range s.namespaces {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		ns := s.namespaces[n]
		if ns.DeletionTimestamp == nil || !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
			continue
		}
		if inUse[n] {
			again = true
			continue
		}
		steps = append(steps, step{kind: finalizeNamespace, ns: ns, why: "the namespace is empty"})
	}
	return steps, again
}

// owner is what a pass does for o, being deleted, as the owner of the
// objects deps (indexes in objects): delete them first (foreground), or
// remove it from them (orphan), then let it go.
func owner(objects []object, o *object, deps []int) (steps []step, again bool) {
	m := &o.meta
	switch {
	case slices.Contains(m.Finalizers, metav1.FinalizerDeleteDependents):
		blocking := false
		for _, i := range deps {
			d := &objects[i]
			ref := refTo(d.meta.OwnerReferences, m.UID)
			block := ref != nil && ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion
			blocking = blocking || block
			if d.meta.DeletionTimestamp != nil {
				continue
			}
			prop := metav1.DeletePropagationBackground
			if block {
				prop = metav1.DeletePropagationForeground
			}
			steps = append(steps, step{kind: deleteObject, obj: d, propagation: prop, why: "its owner is being deleted in the foreground"})
		}
		if blocking {
			return steps, true
		}
		return append(steps, step{kind: dropFinalizer, obj: o, finalizer: metav1.FinalizerDeleteDependents, why: "no dependent blocks its deletion"}), len(deps) > 0
	case slices.Contains(m.Finalizers, metav1.FinalizerOrphanDependents):
		for _, i := range deps {
			d := &objects[i]
			steps = append(steps, step{kind: dropOwners, obj: d, owners: []metav1.OwnerReference{*refTo(d.meta.OwnerReferences, m.UID)}, why: "its owner is deleted orphaning it"})
		}
		if len(deps) > 0 {
			return steps, true
		}
		return append(steps, step{kind: dropFinalizer, obj: o, finalizer: metav1.FinalizerOrphanDependents, why: "its dependents no longer name it"}), false
	}
	return nil, false
}

func refTo(refs []metav1.OwnerReference, uid types.UID) *metav1.OwnerReference {
	for i := range refs {
		if refs[i].UID == uid {
			return &refs[i]
		}
	}
	return nil
}
