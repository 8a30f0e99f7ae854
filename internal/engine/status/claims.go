package status

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/enginemetrics"
	"github.com/quotaplane/quotaplane/internal/engine/fence"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// ClaimWriter writes the engine's decision on each claim into the claim's
// status, queued by claim UID.
type ClaimWriter struct {
	// Decision is what the accounts decided for a claim UID: the decision,
	// the claim, its namespace/name, and whether the claim is known.
	Decision func(uid string) (quota.Decision, quota.Claim, string, bool)
	// Stored reads a claim from the cache by namespace/name.
	Stored func(key string) (*quotav1alpha1.ResourceClaim, bool, error)
	// UpdateStatus writes a claim's status.
	UpdateStatus func(context.Context, *quotav1alpha1.ResourceClaim) error
	// Written is told that a Granted decision is written to the claim uid;
	// it reports whether decisions waited for room in the ledger.
	Written func(uid string) (blocked bool)
	// FirstDenialReady reports whether the first decision of claim uid,
	// stored at resourceVersion rv, may be written as a denial now; when
	// not, the claim is queued again once it may (nil: always).
	FirstDenialReady func(uid, rv string) bool
	// Kick asks for another round of decisions.
	Kick func()
	// Sealer seals Granted decisions.
	Sealer *fence.Sealer
}

// Reconcile writes the decision on claim uid, unless its status already says
// it. A claim the accounts no longer know was deleted: nothing to write.
func (w *ClaimWriter) Reconcile(ctx context.Context, uid string) error {
	d, c, k, known := w.Decision(uid)
	if !known {
		return nil
	}
	stored, exists, err := w.Stored(k)
	if err != nil {
		return err
	}
	if !exists {
		// Created moments ago (a claim admitted earlier): not in the cache yet.
		return fmt.Errorf("claim %s is not in the cache yet", k)
	}
	if string(stored.UID) != uid {
		return nil
	}
	want := ClaimStatus(stored, c, d, w.Sealer)
	if !claimStatusEqual(stored.Status, want) {
		if d.Outcome == quota.QuotaExceeded && w.FirstDenialReady != nil && quotav1alpha1.ClaimDecision(stored.Status.Conditions) == nil &&
			!w.FirstDenialReady(uid, stored.ResourceVersion) {
			return nil
		}
		updated := stored.DeepCopy()
		updated.Status = want
		if err := w.UpdateStatus(ctx, updated); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("writing the decision of claim %s: %w", k, err)
		}
		enginemetrics.DecisionWritten(d.Outcome == quota.Granted, string(d.Outcome))
	}
	if d.Outcome == quota.Granted && w.Written(uid) {
		w.Kick() // room in the in-flight bound: decide the claims held back
	}
	return nil
}

// ClaimStatus renders a decision as the status of a claim, keeping the
// transition times of what did not change.
func ClaimStatus(stored *quotav1alpha1.ResourceClaim, c quota.Claim, d quota.Decision, s *fence.Sealer) quotav1alpha1.ResourceClaimStatus {
	status := quotav1alpha1.ResourceClaimStatus{
		ObservedGeneration: stored.Generation,
		Conditions:         append([]metav1.Condition(nil), stored.Status.Conditions...),
	}
	cond := metav1.Condition{Type: quotav1alpha1.ClaimConditionGranted, ObservedGeneration: stored.Generation}
	switch d.Outcome {
	case quota.Granted:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, quotav1alpha1.ClaimReasonQuotaAvailable, quota.GrantedMessage(d)
	case quota.QuotaExceeded:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, quotav1alpha1.ClaimReasonQuotaExceeded, d.Message+"; the claim holds nothing and is decided again when its buckets gain room"
	case quota.ValidationFailed:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, quotav1alpha1.ClaimReasonValidationFailed, d.Message
	default:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, quotav1alpha1.ClaimReasonPendingEvaluation, d.Message
	}
	if old := meta.FindStatusCondition(status.Conditions, cond.Type); old != nil && old.Reason == quotav1alpha1.ClaimReasonPendingEvaluation && cond.Reason != old.Reason {
		// Deciding is a transition, though the initial Granted=False
		// (PendingEvaluation, the CRD's default) shares its status with a
		// refusal.
		meta.RemoveStatusCondition(&status.Conditions, cond.Type)
	}
	meta.SetStatusCondition(&status.Conditions, cond)
	if d.Outcome == quota.Granted {
		status.DecisionSeal = s.Seal(stored)
	}

	previous := map[quotav1alpha1.ResourceType]quotav1alpha1.RequestAllocation{}
	for _, a := range stored.Status.Allocations {
		previous[a.ResourceType] = a
	}
	now := metav1.Now()
	for _, r := range d.Requests {
		a := quotav1alpha1.RequestAllocation{
			ResourceType:     quotav1alpha1.ResourceType(r.ResourceType),
			Status:           quotav1alpha1.AllocationStatus(r.Status),
			Reason:           r.Reason,
			Message:          r.Message,
			AllocatedAmount:  r.Allocated,
			AllocatingBucket: quota.BucketName(r.Bucket),
		}
		if r.Status == "Granted" {
			a.Message = quota.GrantedRequestMessage(r)
		}
		a.LastTransitionTime = now
		if p, ok := previous[a.ResourceType]; ok && p.Status == a.Status {
			a.LastTransitionTime = p.LastTransitionTime
		}
		status.Allocations = append(status.Allocations, a)
	}
	return status
}

func claimStatusEqual(a, b quotav1alpha1.ResourceClaimStatus) bool {
	if a.ObservedGeneration != b.ObservedGeneration || a.DecisionSeal != b.DecisionSeal || len(a.Allocations) != len(b.Allocations) || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Allocations {
		x, y := a.Allocations[i], b.Allocations[i]
		x.LastTransitionTime, y.LastTransitionTime = metav1.Time{}, metav1.Time{}
		if x != y {
			return false
		}
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message || x.ObservedGeneration != y.ObservedGeneration {
			return false
		}
	}
	return true
}
