package reconcile

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// Unwrap is the object of an informer event: for a delete the informer
// missed, the last state it saw.
func Unwrap(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

// Meta is the object metadata of an informer event's object.
func Meta(obj any) (metav1.Object, error) {
	m, ok := Unwrap(obj).(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no object metadata", obj)
	}
	return m, nil
}

// Lean drops what an informer's copy of an object is never read for: its
// managed fields (who set which field, for server-side apply), often the
// largest part of a small object's metadata. Set as an informer's
// transform (SetTransform), before it runs. An update sent from a lean
// copy leaves the stored managed fields as they are (nil means unchanged).
func Lean(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// LeanInformer sets Lean as inf's transform and returns inf.
func LeanInformer(inf cache.SharedIndexInformer) cache.SharedIndexInformer {
	if err := inf.SetTransform(Lean); err != nil {
		panic(err) // only once it runs, which a new informer does not
	}
	return inf
}
