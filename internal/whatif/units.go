package whatif

import (
	"context"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/pkg/client/clientset/versioned"
)

// Units writes amounts as quota's refusals write them: in the resource
// type's base unit, counted ("600 millicores"), and in its display unit too
// when it converts exactly ("268435456 bytes (256 MiB)"), by
// quota.Registration.Amount. A review's answer holds amounts in base units
// and names no unit: the units are its ResourceRegistrations', by resource
// type. A resource type it does not know is written as the bare number of
// base units, as the answer holds it; so is every amount with nil Units.
type Units map[string]quota.Registration

// ReadUnits reads every ResourceRegistration the client may list (the
// user's: at the root this needs list on resourceregistrations, which the
// reviewer's role alone does not give; in a control plane they are the
// root's, readable by whoever may use the plane).
func ReadUnits(ctx context.Context, c versioned.Interface) (Units, error) {
	l, err := c.QuotaV1alpha1().ResourceRegistrations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the ResourceRegistrations, which name the resource types' units: %w", err)
	}
	u := Units{}
	for i := range l.Items {
		r := convert.Registration(&l.Items[i])
		if _, seen := u[r.ResourceType]; !seen || !r.Deleting {
			u[r.ResourceType] = r
		}
	}
	return u, nil
}

// Amount writes n base units of resourceType.
func (u Units) Amount(resourceType string, n int64) string {
	if r, ok := u[resourceType]; ok {
		return r.Amount(n)
	}
	return strconv.FormatInt(n, 10)
}

// Change writes a change of n base units with its sign: "+6 cores",
// "-2 cores", "0 cores".
func (u Units) Change(resourceType string, n int64) string {
	if n > 0 {
		return "+" + u.Amount(resourceType, n)
	}
	return u.Amount(resourceType, n)
}
