package settle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/ptr"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/cache"
	"github.com/quotaplane/quotaplane/internal/engine/enginemetrics"
	"github.com/quotaplane/quotaplane/internal/engine/fence"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/engine/status"
	"github.com/quotaplane/quotaplane/internal/kinds"
	"github.com/quotaplane/quotaplane/internal/members"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/reconcile"
)

const (
	// DefaultHoldPeriod bounds how long after admission a request can still
	// store its object: the API server cuts requests at 60 s.
	DefaultHoldPeriod = 70 * time.Second
	// storeGrace is how long after a request ended without a clear answer (a
	// timeout, a server error) its object may still land in storage.
	storeGrace = 5 * time.Second
	// RecheckPeriod is how often a grant whose request has not reported its
	// end is checked against storage.
	RecheckPeriod = 5 * time.Second
)

// Settler ends admission's pending entries, queued by claim key: a create's
// grant becomes its claim once the object is stored, an update's claims are
// replaced once the update is stored, and either is released when its
// object was not stored. It also settles budget holds.
type Settler struct {
	Queue reconcile.Queue[string]
	// HoldPeriod bounds how long after admission a request can still store
	// its object (DefaultHoldPeriod when zero).
	HoldPeriod time.Duration
	Cache      *cache.Cache
	Committer  *fence.Committer
	Sealer     *fence.Sealer
	Metadata   metadata.Interface
	Dynamic    dynamic.Interface
	// Planes reach objects stored in control planes (nil: none are).
	Planes *planes.Clients
	Client client.Client
	// Served finds the version an object is read at now: the one its claim
	// recorded may no longer be served.
	Served *kinds.Resolver
	// BudgetMu serializes the journal writes of budget holds (admit.Term).
	BudgetMu *sync.Mutex
	// Ctx is the term's: lookups started in the background end with it.
	Ctx context.Context
}

// NewQueue is the queue a Settler works on.
func NewQueue() reconcile.Queue[string] {
	return reconcile.NewQueue[string](100*time.Millisecond, 2*time.Second)
}

// Reconcile settles the pending entry k: writes the claim of a grant made
// at admission once its object is stored (already granted, owned by that
// object, replacing the grant in the journal in one transaction), settles an
// update, or releases a grant whose request was refused after admission or
// whose object cannot appear any more.
func (s *Settler) Reconcile(ctx context.Context, k string) error {
	p, out, ended, ok := s.Cache.Pending(k)
	if !ok {
		return nil // written or released meanwhile
	}
	if p.Labels[members.Label] != "" {
		// The object is in a member cluster, which this engine cannot
		// read: the claim is written, and the cluster's webhook releases
		// it when the object is not there (docs/clusters.md).
		out = formats.OutcomeStored
	}
	if p.Update {
		return s.settleUpdate(ctx, p, out, ended)
	}
	gvr, ok := quotav1alpha1.ParseResource(p.Resource)
	ref := p.Spec.ResourceRef
	if !ok || ref == nil {
		return s.release(ctx, k, "it names no object")
	}
	if out != formats.OutcomeStored {
		var owner *metav1.PartialObjectMetadata
		err := s.Served.Read(ctx, gvr, func(at schema.GroupVersionResource) error {
			var err error
			md, err := s.metadataOf(p.Extra)
			if err != nil {
				return err
			}
			owner, err = md.Resource(at).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			return err
		})
		switch {
		case err == nil && string(owner.UID) == p.ObjectUID:
		case err == nil || apierrors.IsNotFound(err):
			switch {
			case out == formats.OutcomeRefused:
				return s.release(ctx, k, fmt.Sprintf("the create of %s %s was refused after admission", ref.Kind, ref.Name))
			case out == formats.OutcomeUnclear && time.Since(ended) >= storeGrace:
				return s.release(ctx, k, fmt.Sprintf("the create of %s %s failed and the object was not stored", ref.Kind, ref.Name))
			case time.Since(p.Created.Time) >= s.hold():
				return s.release(ctx, k, fmt.Sprintf("%s %s was not stored within %s of admission", ref.Kind, ref.Name, s.hold()))
			}
			s.Queue.AddAfter(k, RecheckPeriod)
			return nil
		default:
			return err
		}
	}
	return s.writeAdmitted(ctx, p, gvr, p.Name)
}

// metadataOf is the metadata client of the plane a claim's annotations
// name (planes.Annotation), the root's when they name none.
func (s *Settler) metadataOf(annotations map[string]string) (metadata.Interface, error) {
	v, ok := annotations[planes.Annotation]
	if !ok || s.Planes == nil {
		return s.Metadata, nil
	}
	p, err := planes.Parse(v)
	if err != nil {
		return nil, err
	}
	return s.Planes.Metadata(p)
}

// dynamicOf is the dynamic client of the plane annotations name.
func (s *Settler) dynamicOf(annotations map[string]string) (dynamic.Interface, error) {
	v, ok := annotations[planes.Annotation]
	if !ok || s.Planes == nil {
		return s.Dynamic, nil
	}
	p, err := planes.Parse(v)
	if err != nil {
		return nil, err
	}
	return s.Planes.Dynamic(p)
}

// ownerOf is the ownerReference of a claim to its object, when one can be
// valid (the object is stored here, cluster scoped or in the claim's
// namespace; Kubernetes treats any other as absent and would collect the
// claim). A member cluster's claim never has one.
func ownerOf(p *formats.PendingClaim, gvr schema.GroupVersionResource) []metav1.OwnerReference {
	ref := p.Spec.ResourceRef
	if ref.Namespace != "" && ref.Namespace != p.Namespace {
		return nil
	}
	if p.Labels[members.Label] != "" {
		// The object is in a member cluster: this server's garbage
		// collector would find no such owner and delete the claim. The
		// cluster's webhook releases it (docs/clusters.md).
		return nil
	}
	if _, inPlane := p.Extra[planes.Annotation]; inPlane && planes.OwnStorage(gvr.GroupResource()) {
		// The object is in a control plane; the root's garbage collector
		// would not find it (ObjectWatch ties the claim to it instead). An
		// object of a kind the planes do not store for themselves — a
		// Project created through its organization's plane — is the
		// root's, and owns its claim as at the root.
		return nil
	}
	return []metav1.OwnerReference{{
		APIVersion: schema.GroupVersion{Group: gvr.Group, Version: gvr.Version}.String(),
		Kind:       ref.Kind, Name: ref.Name, UID: types.UID(p.ObjectUID),
		// As the reference implementation writes them: the claim is owned
		// by its object but is not its controller, and does not hold up the
		// object's foreground deletion.
		Controller: ptr.To(false), BlockOwnerDeletion: ptr.To(false),
	}}
}

// writeAdmitted writes the claim of grant p under name: decided, and owned
// by its object when an ownerReference can be valid. A claim without a
// valid owner is tied to its object by ObjectWatch. When the name is taken
// by a claim that is not this grant's, the claim is written under a name
// unique to its object: a stored object is never left uncharged.
func (s *Settler) writeAdmitted(ctx context.Context, p *formats.PendingClaim, gvr schema.GroupVersionResource, name string) error {
	k := p.Key()
	qc, d := s.Cache.Provisional(k)
	c := &quotav1alpha1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.Namespace, Name: name, Labels: p.Labels, Annotations: p.Annotations(),
			UID: uuid.NewUUID(), CreationTimestamp: metav1.Now(), Generation: 1,
			OwnerReferences: ownerOf(p, gvr),
		},
		Spec: p.Spec,
	}
	if name != p.Name {
		c.Annotations[quotav1alpha1.AnnotationGrantKey] = k
	}
	c.Status = status.ClaimStatus(c, qc, d, s.Sealer)
	written := s.Committer.Write(ctx, &fence.Ops{Creates: []*quotav1alpha1.ResourceClaim{c}})
	if written.Err != nil {
		return fmt.Errorf("writing claim %s: %w", k, written.Err)
	}
	if _, exists := written.Exists[formats.Key(p.Namespace, name)]; exists {
		return s.adoptStored(ctx, p, gvr, name)
	}
	enginemetrics.DecisionWritten(true, string(d.Outcome))
	s.Cache.Adopt(c) // unless the cache saw the claim first and adopted it
	return nil
}

// adoptStored settles a grant whose claim name is taken: a claim this engine
// wrote (a write that failed in transit yet landed) is adopted; any other
// claim of that name (created through the API after admission checked the
// name) makes the grant's claim go under a name derived from its object.
func (s *Settler) adoptStored(ctx context.Context, p *formats.PendingClaim, gvr schema.GroupVersionResource, name string) error {
	k := p.Key()
	stored := &quotav1alpha1.ResourceClaim{}
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: name}, stored); err != nil {
		return fmt.Errorf("reading claim %s/%s: %w", p.Namespace, name, err)
	}
	if s.Cache.Adopt(stored) {
		return nil
	}
	if name != p.Name {
		// Even the derived name is taken: retried, the grant held meanwhile.
		return fmt.Errorf("the claim names %s and %s/%s are both taken by other claims", k, p.Namespace, name)
	}
	klog.FromContext(ctx).Info("The name of a claim granted at admission was taken after admission; writing it under a name derived from its object", "claim", k)
	return s.writeAdmitted(ctx, p, gvr, derivedName(p))
}

// derivedName is a claim name unique to the grant's object and policy.
func derivedName(p *formats.PendingClaim) string {
	sum := sha256.Sum256([]byte(p.ObjectUID + "/" + p.Policy))
	suffix := "-" + hex.EncodeToString(sum[:6])
	base := p.Name
	if len(base)+len(suffix) > 253 {
		base = base[:253-len(suffix)]
	}
	return base + suffix
}

// release forgets a grant whose object never got stored.
func (s *Settler) release(ctx context.Context, k, why string) error {
	klog.FromContext(ctx).V(2).Info("Releasing quota granted at admission", "claim", k, "why", why)
	if res := s.Committer.Write(ctx, &fence.Ops{Releases: []string{k}}); res.Err != nil {
		return fmt.Errorf("releasing the grant of claim %s: %w", k, res.Err)
	}
	s.Cache.ForgetPending(k)
	return nil
}

func (s *Settler) hold() time.Duration {
	if s.HoldPeriod == 0 {
		return DefaultHoldPeriod
	}
	return s.HoldPeriod
}
