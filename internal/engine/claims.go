package engine

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
)

func (t *term) writeClaim(ctx context.Context, uid string) error {
	t.mu.Lock()
	d, known := t.eng.Decision(uid)
	c, _ := t.eng.Claim(uid)
	k := t.claimKeys[uid]
	t.mu.Unlock()
	if !known {
		return nil // deleted; nothing to write
	}
	obj, exists, err := t.claimInformer.GetStore().GetByKey(k)
	if err != nil {
		return err
	}
	if !exists {
		// Created moments ago (a claim admitted earlier): not in the cache yet.
		return fmt.Errorf("claim %s is not in the cache yet", k)
	}
	return t.writeClaimStatus(ctx, obj.(*quotav1alpha1.ResourceClaim), uid, c, d)
}

// writeClaimStatus writes a decision to a stored claim, unless it already says so.
func (t *term) writeClaimStatus(ctx context.Context, stored *quotav1alpha1.ResourceClaim, uid string, c quota.Claim, d quota.Decision) error {
	k := key(stored.Namespace, stored.Name)
	if string(stored.UID) != uid {
		return nil
	}
	want := claimStatus(stored, c, d, t.sealer)
	if !claimStatusEqual(stored.Status, want) {
		updated := stored.DeepCopy()
		updated.Status = want
		if err := t.r.client.Status().Update(ctx, updated); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("writing the decision of claim %s: %w", k, err)
		}
		result := "denied"
		if d.Outcome == quota.Granted {
			result = "granted"
		}
		decisionsTotal.WithLabelValues(result, string(d.Outcome)).Inc()
	}
	if d.Outcome == quota.Granted {
		t.mu.Lock()
		if _, ok := t.inflight[uid]; ok {
			t.projected[uid] = struct{}{}
		}
		blocked := t.blocked
		t.mu.Unlock()
		if blocked {
			t.kickNow() // room in the in-flight bound: decide the claims held back
		}
	}
	return nil
}

// claimStatus renders a decision as the status of a claim, keeping the
// transition times of what did not change.
func claimStatus(stored *quotav1alpha1.ResourceClaim, c quota.Claim, d quota.Decision, s *sealer) quotav1alpha1.ResourceClaimStatus {
	status := quotav1alpha1.ResourceClaimStatus{
		ObservedGeneration: stored.Generation,
		Conditions:         append([]metav1.Condition(nil), stored.Status.Conditions...),
	}
	cond := metav1.Condition{Type: quotav1alpha1.ClaimConditionGranted, ObservedGeneration: stored.Generation}
	switch d.Outcome {
	case quota.Granted:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, quotav1alpha1.ClaimReasonQuotaAvailable, quota.GrantedMessage(c, d)
	case quota.QuotaExceeded:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, quotav1alpha1.ClaimReasonQuotaExceeded, d.Message+"; the claim holds nothing and is decided again when its buckets gain room"
	case quota.ValidationFailed:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, quotav1alpha1.ClaimReasonValidationFailed, d.Message
	default:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionUnknown, quotav1alpha1.ClaimReasonPendingEvaluation, d.Message
	}
	meta.SetStatusCondition(&status.Conditions, cond)
	if d.Outcome == quota.Granted {
		status.DecisionSeal = s.seal(stored)
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
