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
