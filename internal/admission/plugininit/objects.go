package plugininit

import (
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Unstructured is obj as the plugins read quota kinds: obj itself when it
// is unstructured (a kind served by a CRD, as in `quotaplane controller`'s
// clusters or before serve served them natively), else the typed object
// (a natively served kind) converted. False when obj is nil or does not
// convert.
func Unstructured(obj runtime.Object) (*unstructured.Unstructured, bool) {
	switch o := obj.(type) {
	case nil:
		return nil, false
	case *unstructured.Unstructured:
		return o, true
	}
	if reflect.ValueOf(obj).IsNil() {
		return nil, false
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, false
	}
	u := &unstructured.Unstructured{Object: m}
	u.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	return u, true
}

// Store writes a mutating plugin's changes to u, read with Unstructured
// from obj, back into obj. Nothing to do when u is obj.
func Store(u *unstructured.Unstructured, obj runtime.Object) error {
	if o, ok := obj.(*unstructured.Unstructured); ok && o == u {
		return nil
	}
	fresh := reflect.New(reflect.TypeOf(obj).Elem())
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, fresh.Interface()); err != nil {
		return fmt.Errorf("applying admission's change to %T: %w", obj, err)
	}
	reflect.ValueOf(obj).Elem().Set(fresh.Elem())
	return nil
}
