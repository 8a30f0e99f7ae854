package claimguard

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/members"
)

// maxNamed bounds the objects a refusal names.
const maxNamed = 5

// validateNamespaceDelete refuses to delete a namespace (at the root)
// holding claims its deletion would take while their objects stay: claims
// of live objects stored elsewhere (another namespace, a control plane), and
// claims of member clusters whose claims the requester may not release. The
// claims beside their objects go with them. The message names them and
// says what to do.
func (p *plugin) validateNamespaceDelete(ctx context.Context, a admission.Attributes) error {
	ns := a.GetName()
	list, err := p.Client().Resource(quotav1alpha1.SchemeGroupVersion.WithResource("resourceclaims")).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil // the quota API is not served yet: no claims
		}
		return apierrors.NewInternalError(fmt.Errorf("listing the ResourceClaims of namespace %s: %w", ns, err))
	}
	var held []string
	clusters, gone := map[string]bool{}, map[string]bool{}
	for i := range list.Items {
		c, err := toClaim(&list.Items[i])
		if err != nil || c == nil || !elsewhere(c) {
			continue
		}
		if cluster := c.Labels[members.Label]; cluster != "" {
			if _, asked := clusters[cluster]; !asked {
				clusters[cluster] = p.ask(ctx, members.Access(a.GetUserInfo(), cluster, members.VerbRelease)).allowed
			}
			continue
		}
		if !madeAtAdmission(c) {
			continue
		}
		h, err := p.holderOf(ctx, c, gone)
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("deleting namespace %s: checking whether the object of its ResourceClaim %s is still stored: %w; retry in a moment", ns, c.Name, err))
		}
		if h.live {
			held = append(held, objectName(c)+" "+h.where())
		}
	}
	var refused []string
	for cluster, allowed := range clusters {
		if !allowed {
			refused = append(refused, cluster)
		}
	}
	sort.Strings(refused)
	switch {
	case len(refused) > 0:
		return apierrors.NewForbidden(a.GetResource().GroupResource(), ns, fmt.Errorf(
			"namespace %s holds the ResourceClaims of member clusters %s, which only their webhooks release, and user %q may not release them (verb %q on %s.%s named after the cluster, in namespace %s<cluster>); "+
				"deleting it would release their quota while their objects stay: delete those objects in their clusters first, or ask an administrator of the quota plane",
			ns, strings.Join(refused, ", "), a.GetUserInfo().GetName(), members.VerbRelease, members.Resource, quotav1alpha1.GroupName, members.NamespacePrefix))
	case len(held) == 0:
		return nil
	}
	named := held
	if len(named) > maxNamed {
		named = append(append([]string(nil), named[:maxNamed]...), fmt.Sprintf("and %d more", len(held)-maxNamed))
	}
	return apierrors.NewForbidden(a.GetResource().GroupResource(), ns, fmt.Errorf(
		"namespace %s holds the ResourceClaims of %d objects that live outside it and are still stored (%s); deleting it would release their quota while they stay: delete those objects first (their claims go with them), then the namespace",
		ns, len(held), strings.Join(named, ", ")))
}
