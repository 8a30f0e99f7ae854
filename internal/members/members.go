package members

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// Label names, on a ResourceClaim, the member cluster its object is stored
// in.
const Label = quotav1alpha1.LabelCluster

// NamespacePrefix starts the namespace of the quota plane that holds a
// member cluster's claims when a policy's template names none.
const NamespacePrefix = "cluster-"

// SystemNamespaces of a member are never sent to its webhook (print-config
// leaves them out) nor charged by its reconcile: the cluster must keep
// running when the quota plane cannot answer.
var SystemNamespaces = []string{"kube-system", "kube-public", "kube-node-lease"}

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

// ClusterUser is the requester a cluster's webhook names in its own reviews
// of existing objects (with ExistingObjectExtra). The quota plane honours
// the extra only from this requester, posted by an identity allowed
// VerbReview on the cluster.
func ClusterUser(cluster string) string { return "quotaplane:cluster:" + cluster }

// IdentitiesExtra, in a review's userInfo.extra, is how quotaplane webhook
// says which names it sends. IdentitiesMember: the member's own names, as its
// API server authenticated them; the quota plane maps them into the
// cluster's names itself (MemberName). Webhooks before this mark sent names
// they had prefixed themselves (--user-prefix, by default "<cluster>:"); the
// quota plane maps those too, so that whatever a webhook or a raw post sends,
// every identity of cluster C's reviews is one of C's names.
const (
	IdentitiesExtra  = "quota.miloapis.com/identities"
	IdentitiesMember = "member"
)

// NamePrefix starts every name the quota plane gives an identity of member
// cluster cluster: users and groups, service accounts included.
func NamePrefix(cluster string) string { return cluster + ":" }

// MemberName is the quota plane's name for a user or group name of member
// cluster cluster, as a review sent it. native says the review sent the
// member's own names (IdentitiesMember): each is prefixed, so member users
// "bob" and "east:bob" stay two people (east:bob, east:east:bob). Without
// the mark the names come from an earlier webhook, which prefixed them with
// its --user-prefix ("<cluster>:" by default): a name already under the
// cluster's prefix is kept (the webhook's own mapping, never
// east:east:alice), and any other (a custom prefix, trusted names, a raw
// post) is put under it. Either way the result is one of the cluster's names.
func MemberName(cluster, name string, native bool) string {
	prefix := NamePrefix(cluster)
	if !native && strings.HasPrefix(name, prefix) {
		return name
	}
	return prefix + name
}

// ReservedPrefix starts the quota plane's own user and group names
// (system:masters, system:serviceaccount:..., system:authenticated): the
// quota plane never takes them from a member cluster's review.
const ReservedPrefix = "system:"

// ExtraPrefix starts the user extras quotaplane reads as signals
// (ExistingObjectExtra): the quota plane never passes them on from a member
// cluster's requester.
const ExtraPrefix = "quota.miloapis.com/"

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

// The quota plane decides what a member cluster's webhook may say with RBAC
// on a virtual resource: verb VerbReview on Resource named <cluster> in the
// cluster's namespace (Namespace(cluster)) lets its holder post that
// cluster's reviews, the existing-object ones included; VerbRelease lets it
// delete the claims labelled with that cluster. A RoleBinding of ClusterRole
// quotaplane-member-cluster in cluster-<name> ties an identity to one
// cluster.
const (
	Resource    = "clusters"
	VerbReview  = "review"
	VerbRelease = "release"
)

// Access is the question asked of the quota plane's authorizer: may u
// perform verb on member cluster cluster.
func Access(u user.Info, cluster, verb string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: quotav1alpha1.GroupName, APIVersion: quotav1alpha1.SchemeGroupVersion.Version,
		Resource: Resource, Name: cluster, Namespace: Namespace(cluster), ResourceRequest: true}
}
