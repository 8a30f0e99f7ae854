package quotarequest

import (
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/requests"
)

var resourceGrants = quotav1alpha1.Resource("resourcegrants")

// validateGrant reserves the grants of quota requests — named
// quota-request-* or labelled quota.miloapis.com/quota-request — to serve's
// own request controller. Anyone else, platform admins included, who could
// create one could stage it under a pending request's grant name (the
// approval then stalls on it) or have a decrease count it as a request's;
// changing or deleting one would rewrite what an approval gave. The one
// exception is a delete by system:masters, the break-glass identity: a
// delete only takes quota back, and clears a grant staged before this rule
// (or left by a deleted request).
func validateGrant(a admission.Attributes) error {
	u := a.GetUserInfo()
	if isSelf(u) || a.GetOperation() == admission.Delete && slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		return nil
	}
	name := a.GetName()
	reserved := strings.HasPrefix(name, requests.GrantNamePrefix)
	for _, o := range []runtime.Object{a.GetObject(), a.GetOldObject()} {
		if o == nil {
			continue
		}
		m, err := meta.Accessor(o)
		if err != nil {
			continue
		}
		_, labelled := m.GetLabels()[quotav1alpha1.LabelQuotaRequest]
		if strings.HasPrefix(m.GetName(), requests.GrantNamePrefix) || labelled {
			reserved = true
			if m.GetName() != "" {
				name = m.GetName()
			}
		}
	}
	if !reserved {
		return nil
	}
	verb, next := "create", "give the grant another name and no "+quotav1alpha1.LabelQuotaRequest+" label, or ask for quota with a QuotaRequest"
	switch a.GetOperation() {
	case admission.Update:
		verb, next = "change", "ask for a different limit with a new QuotaRequest"
	case admission.Delete:
		verb, next = "delete", "to lower a limit a request raised, ask for the lower limit with a QuotaRequest (a decrease is applied at once)"
	}
	return apierrors.NewForbidden(resourceGrants, name, fmt.Errorf(
		"grants named %s* or labelled %s are reserved to the quota request controller, which writes the grant of an approved QuotaRequest; %s may not %s %s/%s: %s (docs/self-service.md)",
		requests.GrantNamePrefix, quotav1alpha1.LabelQuotaRequest, u.GetName(), verb, a.GetNamespace(), name, next))
}
