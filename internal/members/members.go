package members

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// Label names, on a ResourceClaim, the member cluster its object is stored
// in.
const Label = quotav1alpha1.LabelCluster

// NamespacePrefix starts the namespace of the quota plane that holds a
// member cluster's claims when a policy's template names none.
const NamespacePrefix = "cluster-"

// ReviewPrefix starts the path a webhook submits a member cluster's
// AdmissionReviews to: ReviewPrefix + <cluster> + "/review".
const ReviewPrefix = "/quota/v1alpha1/clusters/"

// maxName leaves room for NamespacePrefix in a namespace name.
const maxName = validation.DNS1123LabelMaxLength - len(NamespacePrefix)

// ValidateName checks a member cluster's name: a DNS label short enough to
// name its namespace in the quota plane.
func ValidateName(name string) error {
	if name == "" {
		return fmt.Errorf("the member cluster needs a name (--cluster-name): a DNS label of at most %d characters, unique among the quota plane's clusters", maxName)
	}
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return fmt.Errorf("cluster name %q is not a DNS label: %s", name, strings.Join(errs, "; "))
	}
	if len(name) > maxName {
		return fmt.Errorf("cluster name %q has %d characters; at most %d are allowed, so that its namespace %s<name> is a valid name", name, len(name), maxName, NamespacePrefix)
	}
	return nil
}

// Namespace is the namespace of the quota plane holding the claims of a
// member cluster's objects.
func Namespace(cluster string) string { return NamespacePrefix + cluster }

// ReviewPath is the path a cluster's webhook submits reviews to.
func ReviewPath(cluster string) string { return ReviewPrefix + cluster + "/review" }

// ClusterOfPath is the cluster a review path names; false when the path is
// no review path or names an invalid cluster.
func ClusterOfPath(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, ReviewPrefix)
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, "/review")
	if !ok || ValidateName(name) != nil {
		return "", false
	}
	return name, true
}

// ExistingObjectExtra, in a review's userInfo.extra, marks a review of an
// object that exists already, sent by the cluster's webhook itself (its
// reconcile, or verify): no requester is authorized for it; whoever may post
// the cluster's reviews may charge its existing objects.
const ExistingObjectExtra = "quota.miloapis.com/existing-object"

// ChargedAnnotation, in a review's answer (auditAnnotations), says whether
// any policy charged the object: "true" or "false".
const ChargedAnnotation = "quota.miloapis.com/charged"

type clusterKey struct{}

// WithCluster is ctx for a review of an object stored in member cluster
// name.
func WithCluster(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, clusterKey{}, name)
}

// From is the member cluster a request's object is stored in; false for an
// object of the quota plane itself.
func From(ctx context.Context) (string, bool) {
	name, ok := ctx.Value(clusterKey{}).(string)
	return name, ok
}
