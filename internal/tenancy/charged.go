package tenancy

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
)

// chargedTo lists, through c, the objects charged to an organization: one
// entry per ResourceClaim whose consumer it is, naming the object that holds
// the claim (or the claim, when it names none).
func chargedTo(c client.Reader) func(ctx context.Context, org string) ([]string, error) {
	return func(ctx context.Context, org string) ([]string, error) {
		var list quotav1alpha1.ResourceClaimList
		if err := c.List(ctx, &list); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				return nil, nil // the quota API is not installed: nothing is charged
			}
			return nil, fmt.Errorf("listing the ResourceClaims charged to organization %s: %w", org, err)
		}
		var out []string
		for i := range list.Items {
			cl := &list.Items[i]
			ref := cl.Spec.ConsumerRef
			if ref.APIGroup != rmv1alpha1.GroupName || ref.Kind != "Organization" || ref.Name != org {
				continue
			}
			out = append(out, chargedObject(cl))
		}
		sort.Strings(out)
		return out, nil
	}
}

func chargedObject(c *quotav1alpha1.ResourceClaim) string {
	if r := c.Spec.ResourceRef; r != nil && r.Name != "" {
		name := r.Name
		if r.Namespace != "" {
			name = r.Namespace + "/" + r.Name
		}
		return fmt.Sprintf("%s %s (charged to this organization by ResourceClaim %s/%s)", r.Kind, name, c.Namespace, c.Name)
	}
	return fmt.Sprintf("ResourceClaim %s/%s (charged to this organization)", c.Namespace, c.Name)
}
