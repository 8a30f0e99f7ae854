package quotatest

import (
	"slices"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// TestWaitAllowedAsksEveryReplica: two replicas, the second of which
// allows only from its third review on: WaitAllowed returns once both allow
// both attributes, having asked each as the user in its groups and
// system:authenticated.
func TestWaitAllowedAsksEveryReplica(t *testing.T) {
	replica := func(refusals int) (kubernetes.Interface, *[]authorizationv1.SubjectAccessReviewSpec) {
		kube := fake.NewClientset()
		var asked []authorizationv1.SubjectAccessReviewSpec
		kube.PrependReactor("create", "subjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
			sar := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
			asked = append(asked, sar.Spec)
			sar.Status.Allowed = len(asked) > refusals
			return true, sar, nil
		})
		return kube, &asked
	}
	first, askedFirst := replica(0)
	second, askedSecond := replica(2)
	WaitAllowed(t, []kubernetes.Interface{first, second}, "alice", []string{"team"},
		&authorizationv1.ResourceAttributes{Verb: "create", Resource: "configmaps", Namespace: "ns"},
		&authorizationv1.ResourceAttributes{Verb: "claim", Group: "resourcemanager.miloapis.com", Resource: "organizations", Name: "acme"})
	if len(*askedFirst) != 2 || len(*askedSecond) != 4 {
		t.Fatalf("asked the replicas %d and %d times; want 2 (allowed at once) and 4 (two refusals, then both attributes)", len(*askedFirst), len(*askedSecond))
	}
	for _, spec := range append(*askedFirst, *askedSecond...) {
		if spec.User != "alice" || !slices.Equal(spec.Groups, []string{"team", "system:authenticated"}) {
			t.Errorf("asked as %q in %v; want alice in [team system:authenticated]", spec.User, spec.Groups)
		}
	}
}
