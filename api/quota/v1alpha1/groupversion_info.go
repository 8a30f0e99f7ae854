package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of every quota kind.
const GroupName = "quota.miloapis.com"

// SchemeGroupVersion is the group and version of this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

var (
	// SchemeBuilder registers the kinds of this package.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource returns the group-qualified resource for an unqualified name.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&ResourceRegistration{}, &ResourceRegistrationList{},
		&ResourceGrant{}, &ResourceGrantList{},
		&ResourceClaim{}, &ResourceClaimList{},
		&AllowanceBucket{}, &AllowanceBucketList{},
		&ClaimCreationPolicy{}, &ClaimCreationPolicyList{},
		&GrantCreationPolicy{}, &GrantCreationPolicyList{},
		&QuotaRequest{}, &QuotaRequestList{},
		&QuotaApprovalRule{}, &QuotaApprovalRuleList{},
		&QuotaReview{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
