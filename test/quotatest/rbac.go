package quotatest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// A RoleBinding or ClusterRoleBinding takes effect when the RBAC authorizer
// of an API server has it in its informer cache: a moment after the create
// returns, and at another moment on each replica. A test that binds someone
// and then acts as them waits with WaitAllowed (or WaitBound) first, on
// every replica the subject will talk to. TestEveryFreshBindingIsWaitedFor
// (rbac_test.go) refuses a test that does not.

// rbacPoll and rbacWait are how often and how long WaitAllowed asks.
const (
	rbacPoll = 20 * time.Millisecond
	rbacWait = 30 * time.Second
)

// ServiceAccountUser is the user name and groups a token of service account
// ns/name is authenticated as (system:authenticated aside: WaitAllowed adds
// it).
func ServiceAccountUser(ns, name string) (user string, groups []string) {
	return "system:serviceaccount:" + ns + ":" + name, []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}
}

// WaitAllowed waits until the RBAC authorizer of every server in kubes (one
// client per replica the subject will talk to) lets user, in groups and
// system:authenticated, do each of attrs, asking a SubjectAccessReview
// every 20 ms. It fails the test, naming the replica that still says no and
// its reason, if that takes more than 30 s in all.
func WaitAllowed(t testing.TB, kubes []kubernetes.Interface, user string, groups []string, attrs ...*authorizationv1.ResourceAttributes) {
	t.Helper()
	if len(kubes) == 0 || len(attrs) == 0 {
		t.Fatalf("WaitAllowed %s: nothing to ask (%d servers, %d attributes)", user, len(kubes), len(attrs))
	}
	groups = append(slices.Clone(groups), "system:authenticated")
	ctx, cancel := context.WithTimeout(context.Background(), rbacWait)
	defer cancel()
	for i, kube := range kubes {
		for _, a := range attrs {
			why := "not asked in time"
			if err := wait.PollUntilContextCancel(ctx, rbacPoll, true, func(ctx context.Context) (bool, error) {
				sar, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
					Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: a}}, metav1.CreateOptions{})
				switch {
				case ctx.Err() != nil: // keep the last answer
				case err != nil:
					why = "the review failed: " + err.Error()
				default:
					why = fmt.Sprintf("allowed %t, reason %q, evaluation error %q", sar.Status.Allowed, sar.Status.Reason, sar.Status.EvaluationError)
				}
				return err == nil && sar.Status.Allowed, nil
			}); err != nil {
				t.Fatalf("RBAC of replica %d of %d does not allow user %q (groups %v) to do %+v %s after its binding: %s", i+1, len(kubes), user, groups, *a, rbacWait, why)
			}
		}
	}
}

// WaitBound waits, as WaitAllowed on kube, until user (in groups) may do
// what the first concrete rule of ClusterRole role allows — cluster-wide,
// or in namespace bindIn — after a binding to it was created. It returns at
// once if the role does not exist yet (its creator waits) or has no
// concrete rule (only wildcards) to ask about.
func WaitBound(t testing.TB, kube kubernetes.Interface, user string, groups []string, role, bindIn string) {
	t.Helper()
	WaitBoundOn(t, []kubernetes.Interface{kube}, user, groups, role, bindIn)
}

// WaitBoundOn is WaitBound on every server in kubes (one client per replica
// the subject will talk to); the role is read from the first.
func WaitBoundOn(t testing.TB, kubes []kubernetes.Interface, user string, groups []string, role, bindIn string) {
	t.Helper()
	if len(kubes) == 0 {
		t.Fatalf("WaitBoundOn %s: no server to ask", role)
	}
	cr, err := kubes[0].RbacV1().ClusterRoles().Get(context.Background(), role, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return // bound before the role exists: its creator waits for it
	}
	if err != nil {
		t.Fatalf("reading ClusterRole %s: %v", role, err)
	}
	for _, r := range cr.Rules {
		if len(r.Verbs) == 0 || len(r.Resources) == 0 || len(r.APIGroups) == 0 || r.Verbs[0] == "*" || r.Resources[0] == "*" || r.APIGroups[0] == "*" {
			continue
		}
		resource, sub, _ := strings.Cut(r.Resources[0], "/")
		attrs := &authorizationv1.ResourceAttributes{Verb: r.Verbs[0], Group: r.APIGroups[0], Resource: resource, Subresource: sub, Namespace: bindIn}
		if len(r.ResourceNames) > 0 {
			attrs.Name = r.ResourceNames[0]
		}
		WaitAllowed(t, kubes, user, groups, attrs)
		return
	}
}
