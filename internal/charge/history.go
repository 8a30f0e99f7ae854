package charge

import (
	"k8s.io/apiserver/pkg/admission"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/charge/inforce"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/history"
)

// recordRefusal reports a create refused for quota to the decision history
// (docs/observability.md): it leaves no claim, so this is the only trace of
// it beyond an aggregated Event. One entry per rendered claim, in its
// consumer's history, with the requests and the message the client got. A
// dry run records nothing. It never waits.
func (ch *Charger) recordRefusal(a admission.Attributes, applying []*inforce.Policy, claims []*quotav1alpha1.ResourceClaim, msg string) {
	if a.IsDryRun() {
		return
	}
	kind := a.GetKind()
	for i, c := range claims {
		reqs := make([]history.Amount, 0, len(c.Spec.Requests))
		for _, r := range c.Spec.Requests {
			reqs = append(reqs, history.Amount{ResourceType: string(r.ResourceType), Amount: r.Amount})
		}
		ch.handle.RecordRefusal(route.Refusal{Consumer: convert.ConsumerID(c.Spec.ConsumerRef), Policy: applying[i].Name,
			Object:   history.ObjectRef{APIGroup: kind.Group, Kind: kind.Kind, Namespace: a.GetNamespace(), Name: a.GetName()},
			Requests: reqs, Message: msg})
	}
}
