package claimguard

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
