package convert

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// ConsumerID is the one identity of a consumer.
func ConsumerID(r quotav1alpha1.ConsumerRef) quota.ConsumerID {
	return quota.ConsumerID{APIGroup: r.APIGroup, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
}

// Dimensions is a canonical dimension set.
func Dimensions(in []quotav1alpha1.Dimension) quota.Dimensions {
	if len(in) == 0 {
		return nil
	}
	d := make([]quota.Dim, len(in))
	for i, p := range in {
		d[i] = quota.Dim{Key: p.Key, Value: p.Value}
	}
	return quota.NewDimensions(d...)
}

// APIDimensions is the API form of a dimension set.
func APIDimensions(in quota.Dimensions) []quotav1alpha1.Dimension {
	if len(in) == 0 {
		return nil
	}
	out := make([]quotav1alpha1.Dimension, len(in))
	for i, p := range in {
		out[i] = quotav1alpha1.Dimension{Key: p.Key, Value: p.Value}
	}
	return out
}

// Registration converts a ResourceRegistration.
func Registration(r *quotav1alpha1.ResourceRegistration) quota.Registration {
	out := quota.Registration{
		Name:                 r.Name,
		Created:              r.CreationTimestamp.Time,
		ResourceType:         string(r.Spec.ResourceType),
		ConsumerType:         quota.GroupKind{Group: r.Spec.ConsumerType.APIGroup, Kind: r.Spec.ConsumerType.Kind},
		BaseUnit:             r.Spec.BaseUnit,
		DisplayUnit:          r.Spec.DisplayUnit,
		UnitConversionFactor: r.Spec.UnitConversionFactor,
		Deleting:             r.DeletionTimestamp != nil,
	}
	if q := r.Spec.BaseUnitQuantity; q != nil {
		out.BaseUnitQuantity = q.String()
	}
	for _, l := range r.Spec.ParentConsumerTypes {
		out.Levels = append(out.Levels, quota.GroupKind{Group: l.APIGroup, Kind: l.Kind})
	}
	for _, c := range r.Spec.ClaimingResources {
		out.Claiming = append(out.Claiming, quota.GroupKind{Group: c.APIGroup, Kind: c.Kind})
	}
	return out
}

// Grant converts a ResourceGrant.
func Grant(g *quotav1alpha1.ResourceGrant) quota.Grant {
	out := quota.Grant{UID: string(g.UID), Namespace: g.Namespace, Name: g.Name, Consumer: ConsumerID(g.Spec.ConsumerRef), Generation: g.Generation}
	if sel := g.Spec.ConsumerSelector; sel != nil {
		out.Consumer = quota.GroupID(g.Namespace, g.Name)
		out.Group = &quota.Group{Kind: quota.GroupKind{Group: g.Spec.ConsumerRef.APIGroup, Kind: g.Spec.ConsumerRef.Kind}}
		if s, err := metav1.LabelSelectorAsSelector(sel); err == nil {
			out.Group.Selector = s
		} else {
			out.Group.Selector = labels.Nothing()
		}
	}
	if org := g.Labels[quotav1alpha1.BudgetLabel]; org != "" && g.Namespace == quota.OrganizationNamespace(org) {
		out.Budget = &quota.ConsumerID{APIGroup: quota.OrganizationGroup, Kind: "Organization", Name: org}
	}
	out.Window = GrantWindow(g.Spec.ValidFrom, g.Spec.ExpiresAt)
	// The phase the grant itself records (the engine's cache also honours
	// the ledger's records, which may be ahead of it).
	out.Phase = out.Window.Honoured(RecordedPhase(g))
	for _, a := range g.Spec.Allowances {
		al := quota.Allowance{ResourceType: string(a.ResourceType)}
		for _, b := range a.Buckets {
			al.Buckets = append(al.Buckets, quota.GrantBucket{Amount: b.Amount, Dims: Dimensions(b.Dimensions)})
		}
		out.Allowances = append(out.Allowances, al)
	}
	return out
}

// GrantWindow is a grant's window from its two optional bounds.
func GrantWindow(from, until *metav1.Time) quota.Window {
	var w quota.Window
	if from != nil {
		w.From = from.Time
	}
	if until != nil {
		w.Until = until.Time
	}
	return w
}

// RecordedPhase is the phase a grant's status records for its current
// window: PhaseUnknown when it records none, or one for another window.
func RecordedPhase(g *quotav1alpha1.ResourceGrant) quota.Phase {
	st := g.Status.Window
	if st == nil || !GrantWindow(st.ValidFrom, st.ExpiresAt).Equal(GrantWindow(g.Spec.ValidFrom, g.Spec.ExpiresAt)) {
		return quota.PhaseUnknown
	}
	return quota.ParsePhase(string(st.Phase))
}

// Claim converts a ResourceClaim.
func Claim(c *quotav1alpha1.ResourceClaim) quota.Claim {
	out := quota.Claim{UID: string(c.UID), Namespace: c.Namespace, Name: c.Name, Created: c.CreationTimestamp.Time, Consumer: ConsumerID(c.Spec.ConsumerRef)}
	for _, r := range c.Spec.Requests {
		out.Requests = append(out.Requests, quota.Request{ResourceType: string(r.ResourceType), Amount: r.Amount, Dims: Dimensions(r.Dimensions)})
	}
	if ref := c.Spec.ResourceRef; ref != nil {
		out.ResourceRef = &quota.GroupKind{Group: ref.APIGroup, Kind: ref.Kind}
	}
	out.Cluster = c.Labels[quotav1alpha1.LabelCluster]
	return out
}

// IsGranted reports whether a stored claim's status says it is granted.
func IsGranted(c *quotav1alpha1.ResourceClaim) bool {
	return meta.IsStatusConditionTrue(c.Status.Conditions, quotav1alpha1.ClaimConditionGranted)
}

// BucketID is the identity of the bucket an AllowanceBucket shows.
func BucketID(b *quotav1alpha1.AllowanceBucket) quota.BucketID {
	return quota.BucketID{Consumer: ConsumerID(b.Spec.ConsumerRef), ResourceType: string(b.Spec.ResourceType), Dims: Dimensions(b.Spec.Dimensions).Key()}
}

// Thresholds are a registration's warning and critical percentages, the
// defaults where it sets none (and for a nil registration).
func Thresholds(r *quotav1alpha1.ResourceRegistration) quota.Thresholds {
	th := quota.Thresholds{Warning: quota.DefaultWarningPercent, Critical: quota.DefaultCriticalPercent}
	if r != nil && r.Spec.Thresholds != nil {
		if w := r.Spec.Thresholds.Warning; w > 0 {
			th.Warning = w
		}
		if c := r.Spec.Thresholds.Critical; c > 0 {
			th.Critical = c
		}
	}
	return th
}
