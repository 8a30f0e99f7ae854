package claimauthz

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// recordingAuthorizer answers every question with one decision and keeps
// what it was asked.
type recordingAuthorizer struct {
	decision authorizer.Decision
	reason   string
	err      error
	asked    []authorizer.AttributesRecord
}

func (r *recordingAuthorizer) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	r.asked = append(r.asked, a.(authorizer.AttributesRecord))
	return r.decision, r.reason, r.err
}

func TestAuthorizeClaim(t *testing.T) {
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{"tenants"}}
	project := quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Project", Name: "p1"}
	inNamespace := quotav1alpha1.ConsumerRef{Kind: "ServiceAccount", Namespace: "team-a", Name: "builder"}
	cases := map[string]struct {
		consumer  quotav1alpha1.ConsumerRef
		decision  authorizer.Decision
		reason    string
		err       error
		wantAsked []authorizer.AttributesRecord
		wantErr   string
	}{
		"allowed: the consumer's plural resource in its group, by name": {
			consumer: project,
			decision: authorizer.DecisionAllow,
			wantAsked: []authorizer.AttributesRecord{{User: alice, Verb: "claim", APIGroup: "resourcemanager.miloapis.com",
				Resource: "projects", Name: "p1", ResourceRequest: true}},
		},
		"allowed even when the authorizer also reports an error": {
			consumer: project,
			decision: authorizer.DecisionAllow,
			err:      errors.New("webhook slow"),
			wantAsked: []authorizer.AttributesRecord{{User: alice, Verb: "claim", APIGroup: "resourcemanager.miloapis.com",
				Resource: "projects", Name: "p1", ResourceRequest: true}},
		},
		"denied cluster-wide with the authorizer's reason": {
			consumer: project,
			decision: authorizer.DecisionDeny,
			reason:   "RBAC: no binding",
			err:      errors.New("ignored when there is a reason"),
			wantAsked: []authorizer.AttributesRecord{{User: alice, Verb: "claim", APIGroup: "resourcemanager.miloapis.com",
				Resource: "projects", Name: "p1", ResourceRequest: true}},
			wantErr: `user "alice" may not charge quota of Project p1: it needs verb "claim" on projects.resourcemanager.miloapis.com named p1 cluster-wide (RBAC: no binding); ` +
				`ask an owner of p1 for it (a role with that verb and resourceNames: [p1]), or bind quotaplane-owning-service to a service that charges every consumer (docs/authorization.md)`,
		},
		"no opinion in a namespace of the core group, with the authorizer's error": {
			consumer: inNamespace,
			decision: authorizer.DecisionNoOpinion,
			err:      errors.New("authorizer unavailable"),
			wantAsked: []authorizer.AttributesRecord{{User: alice, Verb: "claim", Resource: "serviceaccounts",
				Namespace: "team-a", Name: "builder", ResourceRequest: true}},
			wantErr: `user "alice" may not charge quota of ServiceAccount team-a/builder: it needs verb "claim" on serviceaccounts named builder in namespace team-a (authorizer unavailable); ` +
				`ask an owner of builder for it (a role with that verb and resourceNames: [builder]), or bind quotaplane-owning-service to a service that charges every consumer (docs/authorization.md)`,
		},
		"no opinion without a reason or an error": {
			consumer: inNamespace,
			decision: authorizer.DecisionNoOpinion,
			wantAsked: []authorizer.AttributesRecord{{User: alice, Verb: "claim", Resource: "serviceaccounts",
				Namespace: "team-a", Name: "builder", ResourceRequest: true}},
			wantErr: `user "alice" may not charge quota of ServiceAccount team-a/builder: it needs verb "claim" on serviceaccounts named builder in namespace team-a; ` +
				`ask an owner of builder for it (a role with that verb and resourceNames: [builder]), or bind quotaplane-owning-service to a service that charges every consumer (docs/authorization.md)`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			az := &recordingAuthorizer{decision: tc.decision, reason: tc.reason, err: tc.err}
			err := AuthorizeClaim(context.Background(), az, alice, tc.consumer)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantAsked, az.asked); diff != "" {
				t.Errorf("asked the authorizer (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConsumerName(t *testing.T) {
	cases := map[string]struct {
		consumer quotav1alpha1.ConsumerRef
		want     string
	}{
		"cluster-scoped": {consumer: quotav1alpha1.ConsumerRef{Kind: "Organization", Name: "acme"}, want: "Organization acme"},
		"namespaced":     {consumer: quotav1alpha1.ConsumerRef{Kind: "ServiceAccount", Namespace: "ns", Name: "sa"}, want: "ServiceAccount ns/sa"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ConsumerName(tc.consumer)); diff != "" {
				t.Errorf("ConsumerName (-want +got):\n%s", diff)
			}
		})
	}
}
