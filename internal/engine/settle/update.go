package settle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/engine/enginemetrics"
	"github.com/quotaplane/quotaplane/internal/engine/fence"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/engine/status"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/policy"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/quota/accounting"
)

// settleUpdate ends a pending update: once the update is stored, its new
// claim replaces the old ones (or they are released); an update refused
// after admission, or one that cannot be stored any more, gives its growth
// back and leaves the old claims as they are. Without a report from the
// request (a 5xx, a timeout, a restart), the stored object says which: the
// recorded policy version, evaluated on it, renders the new claim exactly
// when the update is stored.
func (s *Settler) settleUpdate(ctx context.Context, p *formats.PendingClaim, out formats.Outcome, ended time.Time) error {
	k := p.Key()
	gvr, ok := quotav1alpha1.ParseResource(p.Resource)
	if !ok || p.Spec.ResourceRef == nil || p.Check == nil {
		return s.release(ctx, k, "it names no object")
	}
	ref := p.Spec.ResourceRef
	switch out {
	case formats.OutcomeStored:
		return s.writeReplacement(ctx, p, gvr, p.Name)
	case formats.OutcomeRefused:
		return s.release(ctx, k, fmt.Sprintf("the update of %s %s was refused after admission", ref.Kind, ref.Name))
	}
	state, err := s.updateState(ctx, p, gvr)
	if err != nil {
		return err
	}
	switch {
	case state == updateStored:
		return s.writeReplacement(ctx, p, gvr, p.Name)
	case state == updateObjectGone:
		return s.release(ctx, k, fmt.Sprintf("%s %s was deleted", ref.Kind, ref.Name))
	case out == formats.OutcomeUnclear && time.Since(ended) >= storeGrace:
		return s.release(ctx, k, fmt.Sprintf("the update of %s %s failed and was not stored", ref.Kind, ref.Name))
	case time.Since(p.Created.Time) >= s.hold():
		return s.release(ctx, k, fmt.Sprintf("the update of %s %s was not stored within %s of admission", ref.Kind, ref.Name, s.hold()))
	}
	s.Queue.AddAfter(k, RecheckPeriod)
	return nil
}

type updateStateValue int

const (
	updateNotStored updateStateValue = iota
	updateStored
	updateObjectGone
)

// updateState reads the object and evaluates the recorded policy version on
// it: the update is stored when it renders the new claim (or, for a release,
// when the policy no longer applies).
func (s *Settler) updateState(ctx context.Context, p *formats.PendingClaim, gvr schema.GroupVersionResource) (updateStateValue, error) {
	ref := p.Spec.ResourceRef
	var obj *unstructured.Unstructured
	err := s.Served.Read(ctx, gvr, func(at schema.GroupVersionResource) error {
		var err error
		dyn, err := s.dynamicOf(p.Extra)
		if err != nil {
			return err
		}
		obj, err = dyn.Resource(at).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) || (err == nil && string(obj.GetUID()) != p.ObjectUID) {
		return updateObjectGone, nil
	}
	if err != nil {
		return 0, err
	}
	cp := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: p.Policy, Generation: p.Check.Generation},
		Spec: quotav1alpha1.ClaimCreationPolicySpec{Trigger: p.Check.Trigger, Target: p.Check.Target}}
	compiled, err := policy.Compile(cp, policy.Options{})
	if err != nil {
		klog.FromContext(ctx).Error(err, "The policy version recorded with an update does not compile; treating the update as not stored", "claim", p.Key())
		return updateNotStored, nil
	}
	applies, rendered, err := compiled.Evaluate(policy.Input{Object: obj.Object, User: p.Check.User, RequestInfo: p.Check.RequestInfo, Units: s.unitsOf})
	if err != nil {
		klog.FromContext(ctx).V(2).Info("The policy version recorded with an update cannot be evaluated on the stored object; treating the update as not stored", "claim", p.Key(), "err", err)
		return updateNotStored, nil
	}
	if p.Release {
		if !applies {
			return updateStored, nil
		}
		return updateNotStored, nil
	}
	if v, inPlane := p.Extra[planes.Annotation]; inPlane && rendered.Spec.ConsumerRef.Kind == "" {
		// A template without a consumer charges the plane's owner.
		if pl, err := planes.Parse(v); err == nil {
			rendered.Spec.ConsumerRef = quotav1alpha1.ConsumerRef{APIGroup: planes.Group, Kind: pl.OwnerKind(), Name: pl.Name}
		}
	}
	if !applies || rendered.Spec.ConsumerRef != p.Spec.ConsumerRef {
		return updateNotStored, nil
	}
	want := convert.Claim(&quotav1alpha1.ResourceClaim{Spec: p.Spec})
	got := convert.Claim(&quotav1alpha1.ResourceClaim{Spec: rendered.Spec})
	if quota.SameHolding([]quota.Claim{want}, []quota.Claim{got}) {
		return updateStored, nil
	}
	return updateNotStored, nil
}

// unitsOf is the base unit, as a quantity, that a resource type's
// registration declares (policy amounts written as quantities convert to it).
func (s *Settler) unitsOf(resourceType string) (string, bool) {
	var unit string
	var ok bool
	s.Cache.Read(func(acc *accounting.Accounts) { unit, ok = acc.BaseUnitQuantity(resourceType) })
	return unit, ok
}

// writeReplacement writes an update's new claim, decided and owned by its
// object, deletes the claims it replaces and the pending entry, in one fenced
// transaction; then counts the new claim instead of the old ones and the
// growth, in one step.
func (s *Settler) writeReplacement(ctx context.Context, p *formats.PendingClaim, gvr schema.GroupVersionResource, name string) error {
	var c *quotav1alpha1.ResourceClaim
	if !p.Release {
		c = &quotav1alpha1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: p.Namespace, Name: name, Labels: p.Labels, Annotations: p.Annotations(),
				UID: types.UID(p.ClaimUID), CreationTimestamp: metav1.Now(), Generation: 1,
			},
			Spec: p.Spec,
		}
		if name != p.Name {
			c.Annotations[quotav1alpha1.AnnotationGrantKey] = p.Key()
		}
		c.OwnerReferences = ownerOf(p, gvr)
		qc := convert.Claim(c)
		c.Status = status.ClaimStatus(c, qc, quota.GrantedDecision(qc), s.Sealer)
	}
	err := s.Committer.Journal().Replace(ctx, p, c)
	var exists fence.ErrClaimExists
	if errors.As(err, &exists) {
		return s.adoptReplacement(ctx, p, gvr, name)
	}
	if err != nil {
		return fmt.Errorf("writing the claims of an update (%s): %w", p.Describe(), err)
	}
	enginemetrics.DecisionWritten(true, "Resized")
	s.Cache.Swap(p, c)
	return nil
}

// adoptReplacement settles an update whose new claim's name is taken: by the
// claim this engine wrote (a write that failed in transit yet landed), which
// is adopted, or by another claim, and then the new claim goes under a name
// derived from it.
func (s *Settler) adoptReplacement(ctx context.Context, p *formats.PendingClaim, gvr schema.GroupVersionResource, name string) error {
	stored := &quotav1alpha1.ResourceClaim{}
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: name}, stored); err != nil {
		return fmt.Errorf("reading claim %s/%s: %w", p.Namespace, name, err)
	}
	if s.Cache.AdoptUpdate(p, stored) {
		return nil
	}
	if name != p.Name {
		return fmt.Errorf("the claim names %s and %s/%s are both taken by other claims", p.Key(), p.Namespace, name)
	}
	sum := sha256.Sum256([]byte(p.ObjectUID + "/" + p.Policy + "/" + p.Created.String()))
	return s.writeReplacement(ctx, p, gvr, truncateName(p.Name, 240)+"-"+hex.EncodeToString(sum[:5]))
}

func truncateName(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
