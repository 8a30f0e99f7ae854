package verify

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// The quota objects as internal/quota sees them. These mirror the engine's
// conversions (internal/engine/convert.go): verify feeds the same values.

func consumerID(r quotav1alpha1.ConsumerRef) quota.ConsumerID {
	return quota.ConsumerID{APIGroup: r.APIGroup, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
}

func dimensions(in []quotav1alpha1.Dimension) quota.Dimensions {
	if len(in) == 0 {
		return nil
	}
	d := make([]quota.Dim, len(in))
	for i, p := range in {
		d[i] = quota.Dim{Key: p.Key, Value: p.Value}
	}
	return quota.NewDimensions(d...)
}

func toRegistration(r *quotav1alpha1.ResourceRegistration) quota.Registration {
	out := quota.Registration{
		Name:         r.Name,
		Created:      r.CreationTimestamp.Time,
		ResourceType: string(r.Spec.ResourceType),
		ConsumerType: quota.GroupKind{Group: r.Spec.ConsumerType.APIGroup, Kind: r.Spec.ConsumerType.Kind},
		BaseUnit:     r.Spec.BaseUnit,
		Deleting:     r.DeletionTimestamp != nil,
	}
	for _, c := range r.Spec.ClaimingResources {
		out.Claiming = append(out.Claiming, quota.GroupKind{Group: c.APIGroup, Kind: c.Kind})
	}
	return out
}

func toGrant(g *quotav1alpha1.ResourceGrant) quota.Grant {
	out := quota.Grant{UID: string(g.UID), Namespace: g.Namespace, Name: g.Name, Consumer: consumerID(g.Spec.ConsumerRef)}
	for _, a := range g.Spec.Allowances {
		al := quota.Allowance{ResourceType: string(a.ResourceType)}
		for _, b := range a.Buckets {
			al.Buckets = append(al.Buckets, quota.GrantBucket{Amount: b.Amount, Dims: dimensions(b.Dimensions)})
		}
		out.Allowances = append(out.Allowances, al)
	}
	return out
}

func toClaim(uid, ns, name string, created time.Time, spec quotav1alpha1.ResourceClaimSpec) quota.Claim {
	out := quota.Claim{UID: uid, Namespace: ns, Name: name, Created: created, Consumer: consumerID(spec.ConsumerRef)}
	for _, r := range spec.Requests {
		out.Requests = append(out.Requests, quota.Request{ResourceType: string(r.ResourceType), Amount: r.Amount, Dims: dimensions(r.Dimensions)})
	}
	if ref := spec.ResourceRef; ref != nil {
		out.ResourceRef = &quota.GroupKind{Group: ref.APIGroup, Kind: ref.Kind}
	}
	return out
}

func isGranted(c *quotav1alpha1.ResourceClaim) bool {
	return meta.IsStatusConditionTrue(c.Status.Conditions, quotav1alpha1.ClaimConditionGranted)
}

func bucketID(b *quotav1alpha1.AllowanceBucket) quota.BucketID {
	return quota.BucketID{Consumer: consumerID(b.Spec.ConsumerRef), ResourceType: string(b.Spec.ResourceType), Dims: dimensions(b.Spec.Dimensions).Key()}
}

// describeRequests is "1 example.com/things, 2 example.com/cpus (region=x)".
func describeRequests(reqs []quota.Request) string {
	parts := make([]string, len(reqs))
	for i, r := range reqs {
		parts[i] = fmt.Sprintf("%d %s", r.Amount, r.ResourceType)
		if k := r.Dims.Key(); k != "" {
			parts[i] += " (" + k + ")"
		}
	}
	return strings.Join(parts, ", ")
}

func describeBucket(id quota.BucketID) string {
	s := fmt.Sprintf("%s, %s", id.Consumer, id.ResourceType)
	if id.Dims != "" {
		s += " (" + id.Dims + ")"
	}
	return s
}

func kindName(kind, ns, name string) string {
	return kind + " " + nsName(ns, name)
}
