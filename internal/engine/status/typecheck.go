package status

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/policy"
)

func typeCheckedChanged(existing []metav1.Condition, c *metav1.Condition) bool {
	if c == nil {
		return meta.FindStatusCondition(existing, quotav1alpha1.PolicyConditionTypeChecked) != nil
	}
	return conditionChanged(existing, *c)
}

// kindNotServed is the warning of a policy whose trigger kind is not served.
func (w *ConditionWriter) kindNotServed(tr quotav1alpha1.TriggerResource) []policy.Warning {
	if w.KindServed == nil {
		return nil
	}
	gv, err := schema.ParseGroupVersion(tr.APIVersion)
	if err != nil {
		return nil
	}
	served, hint, err := w.KindServed(schema.GroupKind{Group: gv.Group, Kind: tr.Kind})
	if err != nil || served {
		return nil
	}
	return []policy.Warning{{Field: "spec.trigger.resource.kind", Message: policy.KindNotServedWarning(tr, hint)}}
}
