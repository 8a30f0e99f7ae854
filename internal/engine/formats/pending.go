package formats

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// Key is namespace/name, or name for a cluster-scoped object.
func Key(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// Outcome is what the server reported of a create or update after admission.
type Outcome int

const (
	OutcomeUnknown Outcome = iota // not reported (yet)
	OutcomeStored                 // answered 2xx: the object is stored
	OutcomeRefused                // answered 4xx: it was never stored
	OutcomeUnclear                // 5xx, timeout or panic: look it up
)

// PendingClaim is a claim granted at admission whose object may not exist
// yet: the journal holds all of it, so that a new leader can create it.
type PendingClaim struct {
	Namespace string            `json:"ns"`
	Name      string            `json:"n"`
	Labels    map[string]string `json:"l,omitempty"`
	// Extra are the template's annotations; the engine's own are fields.
	Extra     map[string]string               `json:"a,omitempty"`
	Policy    string                          `json:"p"`
	Resource  string                          `json:"r"`
	ObjectUID string                          `json:"u"`
	Spec      quotav1alpha1.ResourceClaimSpec `json:"s"`
	Created   metav1.Time                     `json:"c"`

	// Update: an update of the object changed what Policy charges for it.
	// The claim above (none with Release) replaces the claims in Replaces
	// once the update is stored; until then only Growth, what the new claim
	// asks beyond what those hold, is held besides them. Check lets a later
	// leader find out whether the update was stored.
	Update   bool                            `json:"upd,omitempty"`
	Release  bool                            `json:"rel,omitempty"`
	Replaces []ReplacedClaim                 `json:"x,omitempty"`
	Growth   []quotav1alpha1.ResourceRequest `json:"gr,omitempty"`
	Check    *UpdateCheck                    `json:"k,omitempty"`
	// ClaimUID is the UID the new claim is written with, chosen at
	// admission: the cache adopts a claim for this entry only by it (a claim
	// an earlier entry of the same name wrote may be seen late).
	ClaimUID string `json:"cu,omitempty"`

	// Outcome is what this server reported of the request, when it ended
	// (Ended). Never recorded: a new leader looks the object up instead.
	// Guarded by the engine cache's lock.
	Outcome Outcome   `json:"-"`
	Ended   time.Time `json:"-"`
	// Durable: the entry is known to be in the journal (its write
	// succeeded, or it was read from there). Only a durable grant is given
	// again to a retry of the same attempt. Guarded by the cache's lock.
	Durable bool `json:"-"`
}

// UpdateCheck is what a later leader needs to find out whether an update was
// stored: the version of the policy that computed the new claim, and the
// request's user and requestInfo its expressions read. Evaluated on the
// stored object, it renders the new claim exactly when the update is stored.
type UpdateCheck struct {
	Generation  int64                     `json:"g"`
	Trigger     quotav1alpha1.Trigger     `json:"t"`
	Target      quotav1alpha1.ClaimTarget `json:"x"`
	User        map[string]any            `json:"u,omitempty"`
	RequestInfo map[string]any            `json:"r,omitempty"`
}

// ReplacedClaim is a stored claim an update replaces.
type ReplacedClaim struct {
	Namespace string `json:"ns"`
	Name      string `json:"n"`
	UID       string `json:"u"`
}

// Key is the replaced claim's namespace/name.
func (r ReplacedClaim) Key() string { return Key(r.Namespace, r.Name) }

// ReleaseSuffix ends the key of a release (an update after which a policy
// charges nothing): no claim name can contain it.
const ReleaseSuffix = "#release"

// NewPendingClaim records the claim c admission rendered, created at created.
func NewPendingClaim(c *quotav1alpha1.ResourceClaim, created metav1.Time) *PendingClaim {
	p := &PendingClaim{Namespace: c.Namespace, Name: c.Name, Spec: c.Spec, Created: created,
		Policy: c.Annotations[quotav1alpha1.AnnotationPolicy], Resource: c.Annotations[quotav1alpha1.AnnotationResource],
		ObjectUID: c.Annotations[quotav1alpha1.AnnotationResourceUID]}
	if len(c.Labels) > 0 {
		p.Labels = c.Labels
	}
	p.Extra = ExtraAnnotations(c.Annotations)
	return p
}

// ExtraAnnotations are a template's annotations other than the engine's own,
// nil when there are none.
func ExtraAnnotations(a map[string]string) map[string]string {
	var extra map[string]string
	for k, v := range a {
		if k != quotav1alpha1.AnnotationPolicy && k != quotav1alpha1.AnnotationResource && k != quotav1alpha1.AnnotationResourceUID {
			if extra == nil {
				extra = map[string]string{}
			}
			extra[k] = v
		}
	}
	return extra
}

// Annotations are the claim's annotations: the engine's own and the extra.
func (p *PendingClaim) Annotations() map[string]string {
	a := map[string]string{quotav1alpha1.AnnotationPolicy: p.Policy, quotav1alpha1.AnnotationResource: p.Resource,
		quotav1alpha1.AnnotationResourceUID: p.ObjectUID}
	for k, v := range p.Extra {
		a[k] = v
	}
	return a
}

// Key is the claim's namespace/name; a release (no new claim) is keyed by
// the first claim it releases, with a suffix no claim name can have.
func (p *PendingClaim) Key() string {
	if p.Release {
		return Key(p.Namespace, p.Name) + ReleaseSuffix
	}
	return Key(p.Namespace, p.Name)
}

// ProvisionalID is the ID under which a create's grant is held until its
// claim exists.
func ProvisionalID(claimKey string) string { return "admission:" + claimKey }

// GrowthID is the provisional ID of what an update holds beyond the claims
// it replaces.
func (p *PendingClaim) GrowthID() string { return "update:" + p.Key() }

// GrowthClaim is the growth of an update as a claim of the new consumer.
func (p *PendingClaim) GrowthClaim() quota.Claim {
	c := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, CreationTimestamp: p.Created},
		Spec: p.Spec}
	c.Spec.Requests = p.Growth
	qc := convert.Claim(c)
	qc.UID = p.GrowthID()
	return qc
}

// ProvisionalClaim is a create's grant as a claim, under its provisional ID.
func (p *PendingClaim) ProvisionalClaim() quota.Claim {
	c := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, CreationTimestamp: p.Created}, Spec: p.Spec}
	qc := convert.Claim(c)
	qc.UID = ProvisionalID(p.Key())
	return qc
}

// Describe names an update's change for logs.
func (p *PendingClaim) Describe() string {
	if p.Release {
		return fmt.Sprintf("release of %v", p.Replaces)
	}
	return fmt.Sprintf("claim %s replacing %v", p.Key(), p.Replaces)
}

// GrantKeyOf is the namespace/name under which a claim's grant was recorded
// at admission.
func GrantKeyOf(c *quotav1alpha1.ResourceClaim) string {
	if k := c.Annotations[quotav1alpha1.AnnotationGrantKey]; k != "" {
		return k
	}
	return Key(c.Namespace, c.Name)
}
