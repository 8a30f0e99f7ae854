package claimauthz

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// ClaimVerb is the verb a user needs on a consumer to charge its quota.
const ClaimVerb = "claim"

// AuthorizeClaim reports whether user may charge consumer's quota: verb
// "claim" on the consumer's resource (its kind, lower-cased and plural, in
// its API group), by name. The error says what was asked and how to get it.
func AuthorizeClaim(ctx context.Context, az authorizer.Authorizer, u user.Info, consumer quotav1alpha1.ConsumerRef) error {
	plural, _ := meta.UnsafeGuessKindToResource(schema.GroupVersionKind{Group: consumer.APIGroup, Kind: consumer.Kind})
	attrs := authorizer.AttributesRecord{
		User: u, Verb: ClaimVerb, APIGroup: consumer.APIGroup, Resource: plural.Resource,
		Namespace: consumer.Namespace, Name: consumer.Name, ResourceRequest: true,
	}
	decision, reason, err := az.Authorize(ctx, attrs)
	if decision == authorizer.DecisionAllow {
		return nil
	}
	res := plural.Resource
	if consumer.APIGroup != "" {
		res += "." + consumer.APIGroup
	}
	why := ""
	if reason != "" {
		why = " (" + reason + ")"
	} else if err != nil {
		why = " (" + err.Error() + ")"
	}
	where := "cluster-wide"
	if consumer.Namespace != "" {
		where = "in namespace " + consumer.Namespace
	}
	return fmt.Errorf("user %q may not charge quota of %s: it needs verb %q on %s named %s %s%s; ask an owner of %s for it "+
		"(a role with that verb and resourceNames: [%s]), or bind quotaplane-owning-service to a service that charges every consumer (docs/authorization.md)",
		u.GetName(), ConsumerName(consumer), ClaimVerb, res, consumer.Name, where, why, consumer.Name, consumer.Name)
}

// ConsumerName is how messages name a consumer: Kind namespace/name.
func ConsumerName(c quotav1alpha1.ConsumerRef) string {
	if c.Namespace == "" {
		return c.Kind + " " + c.Name
	}
	return c.Kind + " " + c.Namespace + "/" + c.Name
}
