package memberserve

import (
	"context"
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/quotaplane/quotaplane/internal/members"
)

// mayReview reports whether poster, the identity that posted a review, may
// speak for cluster: verb members.VerbReview on the cluster's virtual
// resource. The error says what was asked and the binding that allows it.
func mayReview(ctx context.Context, az authorizer.Authorizer, poster user.Info, cluster string) error {
	if az == nil {
		return fmt.Errorf("this quota plane cannot authorize reviews of member clusters (serve was assembled without an authorizer); no review is decided")
	}
	decision, reason, err := az.Authorize(ctx, members.Access(poster, cluster, members.VerbReview))
	if decision == authorizer.DecisionAllow {
		return nil
	}
	why := ""
	if reason != "" {
		why = " (" + reason + ")"
	} else if err != nil {
		why = " (" + err.Error() + ")"
	}
	return fmt.Errorf("user %q may not post the reviews of member cluster %s: it needs verb %q on %s.%s named %s in namespace %s%s; "+
		"bind ClusterRole quotaplane-member-cluster to it with a RoleBinding in namespace %s (quotaplane webhook print-rbac --cluster-name %s prints one; docs/clusters.md)",
		poster.GetName(), cluster, members.VerbReview, members.Resource, "quota.miloapis.com", cluster, members.Namespace(cluster), why,
		members.Namespace(cluster), cluster)
}

// requester is a review's requester as the quota plane takes it from a
// member cluster. Unless the cluster is trusted (serve's
// --trust-member-cluster-identities, a platform administrator's setting),
// every user and group name is mapped into the cluster's names
// (members.MemberName), whatever the client sent: a cluster's credential
// speaks for that cluster's identities only. A trusted cluster's names are
// taken as the quota plane's own, except every name of the quota plane's
// own (system:, which includes system:masters): a system: user is nobody
// (no name, no groups), who may charge no consumer. quotaplane's signals in
// the extras are never passed on. existing reports a review of an object
// the cluster stores already, sent by its webhook (ClusterUser with
// ExistingObjectExtra, on a create); the poster's VerbReview allows it.
// notes say why a requester was taken as nobody, for the answer's warnings.
func requester(cluster string, trusted bool, op admissionv1.Operation, in authenticationv1.UserInfo) (u *user.DefaultInfo, existing bool, notes []string) {
	_, marked := in.Extra[members.ExistingObjectExtra]
	existing = marked && op == admissionv1.Create && in.Username == members.ClusterUser(cluster)
	native := slices.Contains(in.Extra[members.IdentitiesExtra], members.IdentitiesMember)
	switch {
	case in.Username == "":
		return &user.DefaultInfo{}, existing, nil
	case existing:
		// The cluster's own identity, charging what it stores: no
		// requester is authorized.
		u = &user.DefaultInfo{Name: in.Username}
	case !trusted:
		u = &user.DefaultInfo{Name: members.MemberName(cluster, in.Username, native), UID: in.UID}
		for _, g := range in.Groups {
			u.Groups = append(u.Groups, members.MemberName(cluster, g, native))
		}
	case strings.HasPrefix(in.Username, members.ReservedPrefix):
		return &user.DefaultInfo{}, existing, []string{fmt.Sprintf(
			"the requester %q, sent by member cluster %s, is a name of the quota plane's own (%s...), which no member may assert: it was taken as nobody, who may charge no quota; "+
				"the quota plane trusts this cluster's identities as its own (serve's --trust-member-cluster-identities), so its service accounts and system: names charge nothing",
			in.Username, cluster, members.ReservedPrefix)}
	default:
		u = &user.DefaultInfo{Name: in.Username, UID: in.UID}
		for _, g := range in.Groups {
			if !strings.HasPrefix(g, members.ReservedPrefix) {
				u.Groups = append(u.Groups, g)
			}
		}
	}
	for k, v := range in.Extra {
		if strings.HasPrefix(k, members.ExtraPrefix) {
			continue // quotaplane's signals are read above, never passed on
		}
		if u.Extra == nil {
			u.Extra = map[string][]string{}
		}
		u.Extra[k] = append([]string(nil), v...)
	}
	return u, existing, nil
}
