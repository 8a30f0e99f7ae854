package v1alpha1

// Labels and annotations on every ResourceGrant a GrantCreationPolicy makes.
// The labels find the grants of a policy and of one trigger object
// (kubectl get resourcegrants -l quota.miloapis.com/grant-policy=<name>);
// a label value longer than a label allows is shortened to a prefix and a
// hash. The annotations keep the full names, and the UID of the trigger
// object the grant was last rendered from.
const (
	// GrantPolicyLabel is the name of the policy that made the grant.
	GrantPolicyLabel = "quota.miloapis.com/grant-policy"
	// GrantPolicyLabelTriggerKind is the kind of the trigger object.
	GrantPolicyLabelTriggerKind = "quota.miloapis.com/trigger-kind"
	// GrantPolicyLabelTriggerName is the name of the trigger object.
	GrantPolicyLabelTriggerName = "quota.miloapis.com/trigger-name"
	// GrantPolicyLabelTriggerNamespace is the namespace of a namespaced
	// trigger object; absent for a cluster-scoped one.
	GrantPolicyLabelTriggerNamespace = "quota.miloapis.com/trigger-namespace"

	// GrantPolicyAnnotation is the full name of the policy that made the
	// grant.
	GrantPolicyAnnotation = "quota.miloapis.com/grant-policy"
	// GrantPolicyAnnotationTriggerUID is the UID of the trigger object.
	GrantPolicyAnnotationTriggerUID = "quota.miloapis.com/trigger-uid"
	// GrantPolicyAnnotationTriggerName is the full name of the trigger
	// object.
	GrantPolicyAnnotationTriggerName = "quota.miloapis.com/trigger-name"
	// GrantPolicyAnnotationTriggerNamespace is the full namespace of a
	// namespaced trigger object.
	GrantPolicyAnnotationTriggerNamespace = "quota.miloapis.com/trigger-namespace"

	// GrantPolicyFinalizer holds a deleted GrantCreationPolicy until every
	// grant it made is deleted, also when the grant engine was not running
	// at the time of the delete.
	GrantPolicyFinalizer = "quota.miloapis.com/grant-policy-cleanup"
)
