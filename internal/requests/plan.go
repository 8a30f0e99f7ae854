package requests

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// limits are a bucket's limit as a request is planned against it.
type limits struct {
	// all is the limit counting now, windowed grants included; permanent
	// the part without them (grants with spec.expiresAt).
	all, permanent, allocated int64
}

// limitsOf reads a bucket's limits: the windowed grants counting now are
// the contributions the engine shows with an expiry.
func limitsOf(b *quotav1alpha1.AllowanceBucket) limits {
	l := limits{all: b.Status.Limit, allocated: b.Status.Allocated}
	var windowed quota.Total
	for _, ref := range b.Status.ContributingGrantRefs {
		if ref.ExpiresAt != nil {
			windowed.Add(ref.Amount)
		}
	}
	l.permanent = quota.Room(l.all, windowed.Value())
	return l
}

// temporary says whether a request asks for a temporary increase.
func temporary(qr *quotav1alpha1.QuotaRequest) bool { return qr.Spec.For != nil }

// base is the limit a request is planned against: a temporary increase
// goes on top of everything counting now; a permanent request sets the
// permanent limit, without the windowed grants that will end.
func (l limits) base(qr *quotav1alpha1.QuotaRequest) int64 {
	if temporary(qr) {
		return l.all
	}
	return l.permanent
}

// planApproval plans an approved request's limit target: never lower than
// its base (another approval may have raised it since it was asked); a
// temporary one only ever adds a grant, expiring spec.for from now.
func planApproval(qr *quotav1alpha1.QuotaRequest, l limits, target int64, grants []quota.RequestGrant, now time.Time) (quota.LimitChange, *metav1.Time, error) {
	base := l.base(qr)
	target = max(target, base)
	if temporary(qr) {
		plan := quota.LimitChange{Target: target, Grant: target - base}
		if plan.Grant == 0 {
			return plan, nil, nil
		}
		until := metav1.NewTime(now.Add(qr.Spec.For.Duration).Truncate(time.Second))
		return plan, &until, nil
	}
	plan, err := quota.PlanLimitChange(base, l.allocated, target, grants)
	return plan, nil, err
}

// temporaryDecreaseRefusal is why a temporary request below the limit is
// refused ("" when it is not one).
func temporaryDecreaseRefusal(qr *quotav1alpha1.QuotaRequest, l limits) string {
	if !temporary(qr) || qr.Spec.RequestedLimit >= l.all {
		return ""
	}
	return fmt.Sprintf("spec.for makes a temporary increase, but %d is below the limit %d now: a decrease cannot be temporary; "+
		"remove spec.for to lower the permanent limit (%d now)", qr.Spec.RequestedLimit, l.all, l.permanent)
}

// windowed says whether a grant has a time window: a decrease never lowers
// it, and a permanent request is planned without it.
func windowed(g *quotav1alpha1.ResourceGrant) bool {
	return g.Spec.ExpiresAt != nil || g.Spec.ValidFrom != nil
}

// counting says whether a windowed grant counts now by its recorded phase
// (one not recorded yet counts when it has no start).
func counting(g *quotav1alpha1.ResourceGrant) bool {
	if w := g.Status.Window; w != nil {
		return w.Phase == quotav1alpha1.GrantWindowActive
	}
	return g.Spec.ValidFrom == nil
}
