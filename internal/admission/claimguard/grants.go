package claimguard

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// windowChange refuses a change of a grant's status.window by anyone but
// serve itself: it is the engine's durable record of where the grant stands
// in its time window, which every later leader honours whatever its clock
// says (a forged Active would make a grant count before its start, a
// forged Expired before its end, or undo an expiry).
func windowChange(a admission.Attributes) error {
	old, err := typed[quotav1alpha1.ResourceGrant](a.GetOldObject(), "ResourceGrant")
	if err != nil {
		return err
	}
	g, err := typed[quotav1alpha1.ResourceGrant](a.GetObject(), "ResourceGrant")
	if err != nil || old == nil || g == nil || equality.Semantic.DeepEqual(old.Status.Window, g.Status.Window) {
		return err
	}
	return apierrors.NewForbidden(grantsResource, a.GetName(), fmt.Errorf(
		"status.window of ResourceGrant %s/%s is the quota engine's record of the grant's time window and is written by the engine only; "+
			"to change when the grant counts, edit spec.validFrom or spec.expiresAt", a.GetNamespace(), a.GetName()))
}

// emptyWindow refuses a new grant whose time window has ended by the time
// it is created: spec.expiresAt at or before its start (spec.validFrom, or
// the creation, now, when it has none). Such a grant would never count,
// yet until the engine recorded its expiry it would look Active; the
// schema already refuses expiresAt at or before validFrom.
func emptyWindow(a admission.Attributes, now time.Time) error {
	g, err := typed[quotav1alpha1.ResourceGrant](a.GetObject(), "ResourceGrant")
	if err != nil || g == nil || g.Spec.ExpiresAt == nil {
		return err
	}
	start := now
	if g.Spec.ValidFrom != nil && g.Spec.ValidFrom.After(now) {
		start = g.Spec.ValidFrom.Time
	}
	if g.Spec.ExpiresAt.After(start) {
		return nil
	}
	return apierrors.NewInvalid(quotav1alpha1.SchemeGroupVersion.WithKind("ResourceGrant").GroupKind(), a.GetName(), field.ErrorList{
		field.Invalid(field.NewPath("spec", "expiresAt"), g.Spec.ExpiresAt.UTC().Format(time.RFC3339), fmt.Sprintf(
			"the grant's window would end before it starts: it starts at %s (spec.validFrom, or its creation now) and spec.expiresAt is not later, so it would never count; "+
				"set spec.expiresAt after %s, or leave it out for a grant without an end", start.UTC().Format(time.RFC3339), start.UTC().Format(time.RFC3339)))})
}
