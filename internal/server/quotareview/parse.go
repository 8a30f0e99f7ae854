package quotareview

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// parse reads a review's objects; every error is on its field.
func parse(r *quotav1alpha1.QuotaReview) ([]*unstructured.Unstructured, field.ErrorList) {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	objects := spec.Child("objects")
	switch n := len(r.Spec.Objects); {
	case r.Spec.Policy != nil && n > 0:
		errs = append(errs, field.Invalid(objects, n, "a review previews a policy (spec.policy) or reviews objects, not both: send two reviews"))
		return nil, errs
	case r.Spec.Policy != nil:
		return nil, errs
	case n == 0:
		errs = append(errs, field.Required(objects, "give the objects to review (at least one); quotaplane what-if -f reads them from files"))
	case n > quotav1alpha1.MaxReviewObjects:
		errs = append(errs, field.TooMany(objects, n, quotav1alpha1.MaxReviewObjects))
		return nil, errs // not read: too many
	}
	if ns := r.Spec.Namespace; ns != "" {
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(spec.Child("namespace"), ns, msg))
		}
	}
	if r.Spec.User == "" && len(r.Spec.Groups) > 0 {
		errs = append(errs, field.Invalid(spec.Child("groups"), r.Spec.Groups, "groups are the groups of spec.user: name the user to review as, or leave both empty to review as yourself"))
	}
	out := make([]*unstructured.Unstructured, len(r.Spec.Objects))
	for i, raw := range r.Spec.Objects {
		p := objects.Index(i)
		u, err := object(raw)
		if err != nil {
			errs = append(errs, field.Invalid(p, "", err.Error()))
			continue
		}
		if u.GetAPIVersion() == "" {
			errs = append(errs, field.Required(p.Child("apiVersion"), "every object names its apiVersion"))
		}
		if u.GetKind() == "" {
			errs = append(errs, field.Required(p.Child("kind"), "every object names its kind"))
		}
		if _, isList := u.Object["items"]; isList && strings.HasSuffix(u.GetKind(), "List") {
			errs = append(errs, field.Invalid(p.Child("kind"), u.GetKind(), "a list is not reviewed as one object: give its items as objects (quotaplane what-if expands lists)"))
		}
		if u.GetName() == "" && u.GetGenerateName() == "" {
			errs = append(errs, field.Required(p.Child("metadata", "name"), "applying an object needs its name (or generateName, for an object always created)"))
		}
		out[i] = u
	}
	return out, errs
}

// object reads one object of a review.
func object(raw runtime.RawExtension) (*unstructured.Unstructured, error) {
	data := raw.Raw
	if len(data) == 0 && raw.Object != nil {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(raw.Object)
		if err != nil {
			return nil, fmt.Errorf("not a Kubernetes object: %v", err)
		}
		return &unstructured.Unstructured{Object: m}, nil
	}
	if len(data) == 0 || string(data) == "null" {
		return nil, fmt.Errorf("empty: give a Kubernetes object")
	}
	m := map[string]any{}
	if err := utiljson.Unmarshal(data, &m); err != nil { // numbers as the API server reads them (int64)
		return nil, fmt.Errorf("not a Kubernetes object (a JSON object with apiVersion, kind and metadata): %v", err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}
