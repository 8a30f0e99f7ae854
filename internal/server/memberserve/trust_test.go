package memberserve

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/quotaplane/quotaplane/internal/members"
)

// A member's requester is always one of its cluster's names (unless the
// cluster is trusted), never the quota plane's own names, groups or
// signals; the existing-object signal is the cluster's webhook's alone.
func TestRequester(t *testing.T) {
	existing := map[string]authenticationv1.ExtraValue{members.ExistingObjectExtra: {"true"}, "team": {"a"}}
	native := map[string]authenticationv1.ExtraValue{members.IdentitiesExtra: {members.IdentitiesMember}}
	for name, tc := range map[string]struct {
		trusted      bool
		op           admissionv1.Operation
		in           authenticationv1.UserInfo
		want         *user.DefaultInfo
		wantExisting bool
		wantNote     string
	}{
		"an earlier webhook's prefixed names are kept": {op: admissionv1.Create, in: authenticationv1.UserInfo{Username: "east:alice", UID: "1", Groups: []string{"east:devs", "east:system:authenticated"}},
			want: &user.DefaultInfo{Name: "east:alice", UID: "1", Groups: []string{"east:devs", "east:system:authenticated"}}},
		"unprefixed names are put under the cluster's": {op: admissionv1.Create, in: authenticationv1.UserInfo{Username: "carol", Groups: []string{"system:masters", "system:authenticated", "bob-admins"}},
			want: &user.DefaultInfo{Name: "east:carol", Groups: []string{"east:system:masters", "east:system:authenticated", "east:bob-admins"}}},
		"another cluster's prefix is no way out": {op: admissionv1.Create, in: authenticationv1.UserInfo{Username: "west:carol", Groups: []string{"west:admins"}},
			want: &user.DefaultInfo{Name: "east:west:carol", Groups: []string{"east:west:admins"}}},
		"a member's own names, marked, are always prefixed": {op: admissionv1.Create, in: authenticationv1.UserInfo{Username: "east:bob", Groups: []string{"devs"}, Extra: native},
			want: &user.DefaultInfo{Name: "east:east:bob", Groups: []string{"east:devs"}}},
		"marked and unmarked agree on a member's user": {op: admissionv1.Create, in: authenticationv1.UserInfo{Username: "bob", Extra: native},
			want: &user.DefaultInfo{Name: "east:bob"}},
		"a member's service account": {op: admissionv1.Create, in: authenticationv1.UserInfo{Username: "system:serviceaccount:tenants:bob", Groups: []string{"system:serviceaccounts"}, Extra: native},
			want: &user.DefaultInfo{Name: "east:system:serviceaccount:tenants:bob", Groups: []string{"east:system:serviceaccounts"}}},
		"trusted: system groups dropped": {trusted: true, op: admissionv1.Create, in: authenticationv1.UserInfo{Username: "mallory", Groups: []string{"system:masters", "system:authenticated", "devs"}, Extra: native},
			want: &user.DefaultInfo{Name: "mallory", Groups: []string{"devs"}}},
		"trusted: a system user is nobody": {trusted: true, op: admissionv1.Create, in: authenticationv1.UserInfo{Username: "system:serviceaccount:tenants:bob", Groups: []string{"devs"}},
			want: &user.DefaultInfo{}, wantNote: "taken as nobody"},
		"no user is nobody": {op: admissionv1.Create, in: authenticationv1.UserInfo{Groups: []string{"devs"}},
			want: &user.DefaultInfo{}},
		"quota extras dropped, others kept; a user's existing mark is no signal": {op: admissionv1.Create, in: authenticationv1.UserInfo{Username: "mallory", Extra: existing},
			want: &user.DefaultInfo{Name: "east:mallory", Extra: map[string][]string{"team": {"a"}}}},
		"the webhook's review of an existing object": {op: admissionv1.Create, in: authenticationv1.UserInfo{Username: members.ClusterUser("east"), Extra: existing},
			want: &user.DefaultInfo{Name: members.ClusterUser("east"), Extra: map[string][]string{"team": {"a"}}}, wantExisting: true},
		"another cluster's webhook name is no signal": {op: admissionv1.Create, in: authenticationv1.UserInfo{Username: members.ClusterUser("west"), Extra: existing},
			want: &user.DefaultInfo{Name: "east:" + members.ClusterUser("west"), Extra: map[string][]string{"team": {"a"}}}},
		"an update is never an existing object": {op: admissionv1.Update, in: authenticationv1.UserInfo{Username: members.ClusterUser("east"), Extra: existing},
			want: &user.DefaultInfo{Name: "east:" + members.ClusterUser("east"), Extra: map[string][]string{"team": {"a"}}}},
	} {
		t.Run(name, func(t *testing.T) {
			got, gotExisting, notes := requester("east", tc.trusted, tc.op, tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("requester (-want +got):\n%s", diff)
			}
			if gotExisting != tc.wantExisting {
				t.Errorf("existing = %t, want %t", gotExisting, tc.wantExisting)
			}
			if tc.wantNote != "" && (len(notes) != 1 || !strings.Contains(notes[0], tc.wantNote)) {
				t.Errorf("notes %q; want one saying %q", notes, tc.wantNote)
			}
		})
	}
}

// answer answers every question with one decision and keeps what it was
// asked.
type answer struct {
	decision authorizer.Decision
	asked    []authorizer.Attributes
}

func (a *answer) Authorize(_ context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	a.asked = append(a.asked, attrs)
	return a.decision, "", nil
}

// The poster is asked verb review on the cluster it posts for; refused, the
// error names the binding that allows it.
func TestMayReview(t *testing.T) {
	poster := &user.DefaultInfo{Name: "system:serviceaccount:kube-system:webhook-east"}
	az := &answer{decision: authorizer.DecisionNoOpinion}
	err := mayReview(context.Background(), az, poster, "west")
	if err == nil || !strings.Contains(err.Error(), `needs verb "review" on clusters.quota.miloapis.com named west in namespace cluster-west`) ||
		!strings.Contains(err.Error(), "RoleBinding in namespace cluster-west") {
		t.Errorf("refused: %v", err)
	}
	if diff := cmp.Diff([]authorizer.Attributes{members.Access(poster, "west", members.VerbReview)}, az.asked); diff != "" {
		t.Errorf("asked (-want +got):\n%s", diff)
	}
	if err := mayReview(context.Background(), &answer{decision: authorizer.DecisionAllow}, poster, "east"); err != nil {
		t.Errorf("allowed: %v", err)
	}
	if err := mayReview(context.Background(), nil, poster, "east"); err == nil {
		t.Error("without an authorizer: allowed")
	}
}
