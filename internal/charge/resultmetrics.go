package charge

import (
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// admissionResult is the seed's admission family: every create a policy
// judges counts once, by result, policy and the kind created. Its labels are
// bounded: policies and kinds are few, results are the constants of
// report.go. ClaimCreationPolicies are cluster-scoped, so policy_namespace is
// always empty; it is kept for the seed's dashboards.
var (
	admissionResult = metrics.NewCounterVec(&metrics.CounterOpts{
		Name: "milo_quota_admission_result_total",
		Help: "Creates judged by a ClaimCreationPolicy at admission, by result (granted, denied, fail_open, undecided, invalid_object, " +
			"invalid_claim, name_taken, unauthorized; under mode warn and audit: would_charge, would_refuse, invalid_object, invalid_claim, unauthorized, undecided), " +
			"policy, the created object's API group and kind, and the mode of the policy's version that judged it (enforce, warn, audit).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result", "policy_name", "policy_namespace", "resource_group", "resource_kind", "mode"})
	registerResult = sync.OnceFunc(func() { legacyregistry.MustRegister(admissionResult) })
)

// countResult counts one create judged by policy into the seed's family, with
// the kind the policy charges (the created object's): report.go's result
// calls it.
func (r *reporter) countResult(policy, result string, mode quotav1alpha1.PolicyMode) {
	var gk schema.GroupKind
	if group, kind, ok := r.ch.policies.GroupKind(policy); ok {
		gk = schema.GroupKind{Group: group, Kind: kind}
	}
	countAdmissionResult(policy, gk, result, mode)
}

// countAdmissionResult counts one create judged by policy, of an object of
// kind gk, by a version in mode.
func countAdmissionResult(policy string, gk schema.GroupKind, result string, mode quotav1alpha1.PolicyMode) {
	registerResult()
	admissionResult.WithLabelValues(result, policy, "", gk.Group, gk.Kind, strings.ToLower(string(quotav1alpha1.ModeOf(mode)))).Inc()
}
