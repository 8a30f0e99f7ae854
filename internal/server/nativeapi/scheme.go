package nativeapi

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kubernetes/pkg/api/legacyscheme"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	resourcemanagerv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
)

// Scheme is the scheme the native kinds are registered in: the API
// server's own (legacyscheme), so that its storage factory encodes them
// (protobuf in etcd) and its OpenAPI namer knows them. Register must run
// before the API server's configuration is built.
func Scheme() *runtime.Scheme {
	Register()
	return legacyscheme.Scheme
}

// Register adds the native kinds to the API server's scheme, once: the
// versioned types, the same types as the groups' internal version (the
// API server converts to an internal version; here it is the same Go
// type), the defaults the CRD schema declares, and the field selectors.
func Register() { register() }

var register = sync.OnceFunc(func() {
	s := legacyscheme.Scheme
	for _, add := range []func(*runtime.Scheme) error{quotav1alpha1.AddToScheme, resourcemanagerv1alpha1.AddToScheme, addInternal, addDefaults} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("registering quotaplane's kinds: %v", err))
		}
	}
	for _, gv := range GroupVersions {
		if err := s.SetVersionPriority(gv); err != nil {
			panic(err)
		}
	}
})

// addInternal registers every versioned type of quotaplane's again as its
// group's internal version.
func addInternal(s *runtime.Scheme) error {
	for _, gv := range GroupVersions {
		internal := schema.GroupVersion{Group: gv.Group, Version: runtime.APIVersionInternal}
		for kind, t := range s.KnownTypes(gv) {
			if !strings.HasPrefix(t.PkgPath(), apiPackages) {
				continue // the meta types every group version carries
			}
			s.AddKnownTypeWithName(internal.WithKind(kind), reflect.New(t).Interface().(runtime.Object))
		}
	}
	return nil
}

// apiPackages is where quotaplane's API types live.
const apiPackages = "github.com/quotaplane/quotaplane/api/"

// pendingEvaluation is the condition a ResourceClaim reads until it is
// decided: the CRD schema's default of status, applied as the CRD server
// applies it (on every read, while the claim has no conditions).
func pendingEvaluation() metav1.Condition {
	return metav1.Condition{Type: quotav1alpha1.ClaimConditionGranted, Status: metav1.ConditionFalse,
		Reason: quotav1alpha1.ClaimReasonPendingEvaluation, Message: "Awaiting capacity evaluation",
		LastTransitionTime: metav1.NewTime(time.Unix(0, 0).UTC())}
}

// addDefaults sets what the CRD schemas default and Go's zero values do
// not: a claim's pending condition, a policy's failurePolicy.
func addDefaults(s *runtime.Scheme) error {
	s.AddTypeDefaultingFunc(&quotav1alpha1.ResourceClaim{}, func(o any) {
		c := o.(*quotav1alpha1.ResourceClaim)
		if reflect.ValueOf(c.Status).IsZero() { // the CRD defaults an absent status
			c.Status.Conditions = []metav1.Condition{pendingEvaluation()}
		}
	})
	s.AddTypeDefaultingFunc(&quotav1alpha1.ClaimCreationPolicy{}, func(o any) {
		p := o.(*quotav1alpha1.ClaimCreationPolicy)
		if p.Spec.FailurePolicy == "" {
			p.Spec.FailurePolicy = quotav1alpha1.FailurePolicyFail
		}
	})
	s.AddTypeDefaultingFunc(&quotav1alpha1.ResourceClaimList{}, func(o any) {
		l := o.(*quotav1alpha1.ResourceClaimList)
		for i := range l.Items {
			s.Default(&l.Items[i])
		}
	})
	s.AddTypeDefaultingFunc(&quotav1alpha1.ClaimCreationPolicyList{}, func(o any) {
		l := o.(*quotav1alpha1.ClaimCreationPolicyList)
		for i := range l.Items {
			s.Default(&l.Items[i])
		}
	})
	return nil
}
