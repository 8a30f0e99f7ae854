package quotareview

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/dynamic"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/charge"
	"github.com/quotaplane/quotaplane/internal/charge/walk"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/policy"
)

var namespacesGVR = corev1.SchemeGroupVersion.WithResource("namespaces")

// preview answers a review of spec.policy: the candidate evaluated on every
// object of its trigger kind that exists, charging nothing. It reads every
// tenant's objects and usage, so the requester must be allowed to create
// ClaimCreationPolicies (a reviewer's role is not enough), and it is
// answered at the root only, where policies are.
func (r *REST) preview(ctx context.Context, ch *charge.Charger, requester user.Info, spec quotav1alpha1.QuotaReviewSpec) (*quotav1alpha1.PolicyPreviewResult, error) {
	gr := quotav1alpha1.Resource("quotareviews")
	if plane, ok := planes.From(ctx); ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("a policy preview is answered at the root control plane, where ClaimCreationPolicies are, not in control plane %s: send it to the root", plane))
	}
	if spec.User != "" {
		return nil, apierrors.NewInvalid(quotav1alpha1.SchemeGroupVersion.WithKind("QuotaReview").GroupKind(), "", field.ErrorList{field.Invalid(
			field.NewPath("spec", "user"), spec.User, "a policy preview answers what the policy would charge everyone; it is not asked as another user: leave spec.user empty")})
	}
	d, reason, err := r.RootAuthorizer.Authorize(ctx, authorizer.AttributesRecord{User: requester, Verb: "create", APIGroup: quotav1alpha1.GroupName,
		APIVersion: quotav1alpha1.SchemeGroupVersion.Version, Resource: "claimcreationpolicies", ResourceRequest: true})
	if d != authorizer.DecisionAllow {
		why := reason
		if err != nil {
			why = err.Error()
		}
		return nil, apierrors.NewForbidden(gr, "", fmt.Errorf(
			"user %q may not preview a ClaimCreationPolicy: a preview reads every tenant's objects and usage, so it needs verb create on claimcreationpolicies.%s (%s); ask a platform administrator, or review your own objects with spec.objects",
			requester.GetName(), quotav1alpha1.GroupName, why))
	}
	cand := spec.Policy
	path := field.NewPath("spec", "policy", "spec")
	compiled, err := policy.Compile(&quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: cand.Name}, Spec: cand.Spec}, policy.Options{})
	if err != nil {
		var perr *policy.Error
		msg := err.Error()
		if errors.As(err, &perr) {
			msg = perr.Error()
		}
		return nil, apierrors.NewInvalid(quotav1alpha1.SchemeGroupVersion.WithKind("QuotaReview").GroupKind(), "", field.ErrorList{field.Invalid(path, "",
			"the candidate policy would not be Ready: "+msg+"; correct it and preview it again")})
	}
	if compiled.ConstraintsReadRequest() {
		return nil, apierrors.NewInvalid(quotav1alpha1.SchemeGroupVersion.WithKind("QuotaReview").GroupKind(), "", field.ErrorList{field.Invalid(path.Child("trigger", "constraints"), "",
			"the constraints read user or requestInfo, which an object that exists does not have: the objects it would match cannot be previewed; preview it without those constraints")})
	}
	mapper, err := r.restMapper()
	if err != nil {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("reading the kinds the server serves: %v; retry", err))
	}
	dyn, err := dynamic.NewForConfig(r.Loopback)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	w := &walk.Walker{Mapper: mapper, Dynamic: dyn,
		Planes: func(ctx context.Context) ([]planes.Listed, error) { return planes.List(ctx, dyn) },
		PlaneDynamic: func(p planes.Plane) (dynamic.Interface, error) {
			return dynamic.NewForConfig(planes.ConfigFor(r.Loopback, p))
		},
		NamespaceOpen: func(ctx context.Context, ns string) error {
			n, err := dyn.Resource(namespacesGVR).Get(ctx, ns, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				return errors.New("does not exist")
			case err != nil:
				return err
			case n.GetDeletionTimestamp() != nil:
				return errors.New("is being deleted")
			}
			return nil
		},
		Units: ch.Units, SystemNamespace: ch.SystemNamespace(), Exemptions: ch.Exemptions()}
	reading, err := w.Reading(ctx, cand.Name)
	if err != nil {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("%v; retry", err))
	}
	res, err := w.Preview(ctx, walk.Version{Name: cand.Name, Trigger: cand.Spec.Trigger, Target: cand.Spec.Target}, reading)
	if err != nil {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("evaluating the candidate policy on the objects that exist: %v; retry", err))
	}
	res.Summary.Mode = quotav1alpha1.PolicyModeEnforce
	return res, nil
}
