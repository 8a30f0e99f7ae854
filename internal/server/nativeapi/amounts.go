package nativeapi

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// unconverted refuses amounts still written as quantities: serve's
// QuotaAmounts admission converts them to base units before validation,
// so one left means that admission did not run (it is disabled).
func unconverted(obj runtime.Object) field.ErrorList {
	var errs field.ErrorList
	check := func(q string, path *field.Path) {
		if q != "" {
			errs = append(errs, field.Invalid(path, q, "must be an integer in base units: quantities are converted by the QuotaAmounts admission plugin, which is not enabled"))
		}
	}
	switch o := obj.(type) {
	case *quotav1alpha1.ResourceClaim:
		for i, r := range o.Spec.Requests {
			check(r.AmountQuantity, field.NewPath("spec", "requests").Index(i).Child("amount"))
		}
	case *quotav1alpha1.ResourceGrant:
		for i, al := range o.Spec.Allowances {
			for j, b := range al.Buckets {
				check(b.AmountQuantity, field.NewPath("spec", "allowances").Index(i).Child("buckets").Index(j).Child("amount"))
			}
		}
	case *quotav1alpha1.GrantCreationPolicy:
		for i, al := range o.Spec.Target.ResourceGrantTemplate.Spec.Allowances {
			for j, b := range al.Buckets {
				check(b.AmountQuantity, field.NewPath("spec", "target", "resourceGrantTemplate", "spec", "allowances").Index(i).Child("buckets").Index(j).Child("amount"))
			}
		}
	}
	return errs
}
