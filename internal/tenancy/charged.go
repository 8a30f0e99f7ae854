package tenancy

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
)

// chargedTo lists, through c, the objects charged to a consumer of kind
// (Organization or Project): one entry per ResourceClaim whose consumer it
// is, naming the object that holds the claim (or the claim, when it names
// none).
func chargedTo(c client.Reader, kind string) func(ctx context.Context, name string) ([]string, error) {
	return func(ctx context.Context, name string) ([]string, error) {
		var list quotav1alpha1.ResourceClaimList
		if err := c.List(ctx, &list); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				return nil, nil // the quota API is not installed: nothing is charged
			}
			return nil, fmt.Errorf("listing the ResourceClaims charged to %s %s: %w", kind, name, err)
		}
		var out []string
		for i := range list.Items {
			cl := &list.Items[i]
			ref := cl.Spec.ConsumerRef
			if ref.APIGroup != rmv1alpha1.GroupName || ref.Kind != kind || ref.Name != name {
				continue
			}
			out = append(out, chargedObject(cl, kind))
		}
		sort.Strings(out)
		return out, nil
	}
}

func chargedObject(c *quotav1alpha1.ResourceClaim, kind string) string {
	if r := c.Spec.ResourceRef; r != nil && r.Name != "" {
		name := r.Name
		if r.Namespace != "" {
			name = r.Namespace + "/" + r.Name
		}
		return fmt.Sprintf("%s %s (charged to this %s by ResourceClaim %s/%s)", r.Kind, name, strings.ToLower(kind), c.Namespace, c.Name)
	}
	return fmt.Sprintf("ResourceClaim %s/%s (charged to this %s)", c.Namespace, c.Name, strings.ToLower(kind))
}
