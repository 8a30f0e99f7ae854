package quotaclaim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/pkg/client/clientset/versioned"
)

// Phase is where a claim's decision stands.
type Phase string

const (
	// Granted: every request is allocated; provision the resource.
	Granted Phase = "Granted"
	// Denied: a request does not fit now. The engine decides the claim again
	// when room appears (a grant raised, another claim released); keep the
	// resource waiting, not failed.
	Denied Phase = "Denied"
	// Pending: not decided yet.
	Pending Phase = "Pending"
)

// Status is a claim's decision as a service reads it.
type Status struct {
	Phase Phase
	// Claim is the claim's namespace and name.
	Claim types.NamespacedName
	// Reason and Message are the decision's (a refusal names each level's
	// limit, what is available, and where to ask for more).
	Reason, Message string
	// Allocations are the outcome of each request.
	Allocations []quotav1alpha1.RequestAllocation
}

// Owner is the object a claim is for: the service's own resource.
type Owner struct {
	// APIVersion and Kind of the owner (group/version, or the version of
	// the core group).
	APIVersion, Kind string
	Namespace, Name  string
	UID              types.UID
}

// OwnerOf is obj as an Owner, of kind gvk.
func OwnerOf(obj metav1.Object, gvk schema.GroupVersionKind) Owner {
	return Owner{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()}
}

// AnnotationCreator is written by the API server on every ResourceClaim
// created through it: the user who created it. Clients cannot set or
// change it.
const AnnotationCreator = quotav1alpha1.AnnotationCreator

// LabelOwnerUID marks a service's claim with its owner's UID.
const LabelOwnerUID = "quota.miloapis.com/owner-uid"

// ConditionQuotaGranted is the condition SetCondition writes on the owner.
const ConditionQuotaGranted = "QuotaGranted"

// Claimer ensures and releases the claims of one owning service.
type Claimer struct {
	// Client reaches the quota API: the root, a project's control plane
	// (its URL), or the cluster quotaplane controller runs against.
	Client versioned.Interface
	// Namespace holds the claims.
	Namespace string
	// Service names the service: the prefix of its claims' names (a DNS
	// label) and their app.kubernetes.io/managed-by label.
	Service string
	// Identity is the user name Client authenticates as (WhoAmI finds it):
	// only claims the server says it created are adopted.
	Identity string
	// OwnerReferences makes each claim a dependent of its owner, so that
	// the owner's deletion releases it through the garbage collector even
	// while the service is down. The owner must be in Namespace on the same
	// API server. Otherwise release with Release before the owner goes (a
	// finalizer of the service's on the owner).
	OwnerReferences bool
}

// Name is the name of owner's claim: the service and the owner's UID, so
// the same owner always names the same claim and another owner never does.
func (c *Claimer) Name(owner Owner) string { return c.Service + "-" + string(owner.UID) }

// ConflictError says that a claim of the owner's name exists and is not
// this service's claim for it: created by someone else, or for another
// consumer, object or amounts.
type ConflictError struct {
	Claim types.NamespacedName
	Why   string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("ResourceClaim %s exists and is not this service's claim for the owner: %s", e.Claim, e.Why)
}

// IsConflict reports whether err is a ConflictError.
func IsConflict(err error) bool {
	var c *ConflictError
	return errors.As(err, &c)
}

// Ensure makes owner's claim for requests of consumer's quota exist, once,
// and returns its decision. Called again (a retry, a restart, a crash
// between creating the claim and provisioning) it finds the same claim and
// returns its decision as it now stands. A claim of that name the server
// says another identity created, or that claims anything else, is not
// adopted: Ensure returns a ConflictError.
func (c *Claimer) Ensure(ctx context.Context, owner Owner, consumer quotav1alpha1.ConsumerRef, requests []quotav1alpha1.ResourceRequest) (Status, error) {
	if err := c.validate(owner); err != nil {
		return Status{}, err
	}
	want := c.Claim(owner, consumer, requests)
	claims := c.Client.QuotaV1alpha1().ResourceClaims(c.Namespace)
	got, err := claims.Create(ctx, want, metav1.CreateOptions{FieldManager: c.Service})
	if apierrors.IsAlreadyExists(err) {
		got, err = claims.Get(ctx, want.Name, metav1.GetOptions{})
		if err == nil {
			err = c.adoptable(got, want)
		}
	}
	if err != nil {
		return Status{}, err
	}
	return StatusOf(got), nil
}

// Get returns owner's claim's decision, and whether the claim exists.
func (c *Claimer) Get(ctx context.Context, owner Owner) (Status, bool, error) {
	got, err := c.Client.QuotaV1alpha1().ResourceClaims(c.Namespace).Get(ctx, c.Name(owner), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return Status{}, false, nil
	case err != nil:
		return Status{}, false, err
	}
	return StatusOf(got), true, nil
}

// Release deletes owner's claims (the first, and those Resize made), giving
// their quota back, if they are this service's: once, however often it is
// called. A claim created by someone else is left alone.
func (c *Claimer) Release(ctx context.Context, owner Owner) error {
	claims := c.Client.QuotaV1alpha1().ResourceClaims(c.Namespace)
	list, err := claims.List(ctx, metav1.ListOptions{LabelSelector: LabelOwnerUID + "=" + string(owner.UID)})
	if err != nil {
		return err
	}
	for i := range list.Items {
		cl := &list.Items[i]
		if cl.Annotations[AnnotationCreator] != c.Identity || c.indexOf(owner, cl.Name) < 0 {
			continue
		}
		if err := c.deleteClaim(ctx, cl); err != nil {
			return err
		}
	}
	return nil
}

func (c *Claimer) validate(owner Owner) error {
	switch {
	case c.Client == nil || c.Namespace == "" || c.Service == "" || c.Identity == "":
		return errors.New("a Claimer needs a Client, a Namespace, a Service and an Identity")
	case owner.UID == "" || owner.Name == "" || owner.Kind == "":
		return fmt.Errorf("the owner %s %s has no UID yet: ensure its claim once it is stored", owner.Kind, owner.Name)
	case c.OwnerReferences && owner.Namespace != c.Namespace:
		return fmt.Errorf("an ownerReference needs the owner in the claims' namespace %s, not %s: release with Release instead", c.Namespace, owner.Namespace)
	}
	return nil
}

// Claim is the claim Ensure creates for owner's requests of consumer's
// quota, and Check evaluates: a QuotaReview holding it (docs/what-if.md)
// answers as Check does (test/integration/review TestCheckGivesTheReviewsAnswer),
// alongside the other objects a change would create.
func (c *Claimer) Claim(owner Owner, consumer quotav1alpha1.ConsumerRef, requests []quotav1alpha1.ResourceRequest) *quotav1alpha1.ResourceClaim {
	gv, _ := schema.ParseGroupVersion(owner.APIVersion)
	cl := &quotav1alpha1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: c.Name(owner), Namespace: c.Namespace,
			Labels: map[string]string{quotav1alpha1.LabelManagedBy: c.Service, LabelOwnerUID: string(owner.UID)}},
		Spec: quotav1alpha1.ResourceClaimSpec{
			ConsumerRef: consumer,
			Requests:    slices.Clone(requests),
			ResourceRef: &quotav1alpha1.ResourceRef{APIGroup: gv.Group, Kind: owner.Kind, Name: owner.Name, Namespace: owner.Namespace},
		},
	}
	if c.OwnerReferences {
		// The owner's controller reference: controllers that watch the
		// claims they own (controller-runtime's Owns) hear of its decision.
		cl.OwnerReferences = []metav1.OwnerReference{{APIVersion: owner.APIVersion, Kind: owner.Kind, Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}
	}
	return cl
}

// adoptable says why got, found under want's name, is not this service's
// claim for want's owner, or nil.
func (c *Claimer) adoptable(got, want *quotav1alpha1.ResourceClaim) error {
	why := ""
	switch creator := got.Annotations[AnnotationCreator]; {
	case creator != c.Identity:
		if creator == "" {
			creator = "an unknown identity"
		}
		why = fmt.Sprintf("it was created by %s, not by this service (%s)", creator, c.Identity)
	case got.Labels[LabelOwnerUID] != want.Labels[LabelOwnerUID]:
		why = "it is labelled for another owner"
	case !equality.Semantic.DeepEqual(got.Spec.ConsumerRef, want.Spec.ConsumerRef):
		why = fmt.Sprintf("it charges %s %s, not %s %s", got.Spec.ConsumerRef.Kind, got.Spec.ConsumerRef.Name, want.Spec.ConsumerRef.Kind, want.Spec.ConsumerRef.Name)
	case !equality.Semantic.DeepEqual(got.Spec.ResourceRef, want.Spec.ResourceRef):
		why = "it is for another object"
	case !sameRequests(got.Spec.Requests, want.Spec.Requests):
		why = fmt.Sprintf("it asks for %s, not %s (claims are immutable: to resize, use Resize)", describe(got.Spec.Requests), describe(want.Spec.Requests))
	default:
		return nil
	}
	return &ConflictError{Claim: types.NamespacedName{Namespace: got.Namespace, Name: got.Name}, Why: why}
}

func sameRequests(a, b []quotav1alpha1.ResourceRequest) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ResourceType != b[i].ResourceType || a[i].Amount != b[i].Amount || !equality.Semantic.DeepEqual(a[i].Dimensions, b[i].Dimensions) {
			return false
		}
	}
	return true
}

func describe(rs []quotav1alpha1.ResourceRequest) string {
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%d %s", r.Amount, r.ResourceType))
	}
	return strings.Join(parts, ", ")
}

// StatusOf reads a claim's decision.
func StatusOf(cl *quotav1alpha1.ResourceClaim) Status {
	st := Status{Phase: Pending, Claim: types.NamespacedName{Namespace: cl.Namespace, Name: cl.Name}, Allocations: cl.Status.Allocations}
	d := quotav1alpha1.ClaimDecision(cl.Status.Conditions)
	switch {
	case d == nil:
		st.Reason, st.Message = quotav1alpha1.ClaimReasonPendingEvaluation, "the quota engine has not decided the claim yet"
	case d.Status == metav1.ConditionTrue:
		st.Phase, st.Reason, st.Message = Granted, d.Reason, d.Message
	default:
		st.Phase, st.Reason, st.Message = Denied, d.Reason, d.Message
	}
	return st
}

// SetCondition mirrors st onto an owner's conditions as QuotaGranted (True
// when Granted; False with the refusal's reason and message when Denied;
// Unknown while Pending), observed at generation. It reports whether the
// conditions changed.
func SetCondition(conds *[]metav1.Condition, generation int64, st Status) bool {
	status := metav1.ConditionUnknown
	switch st.Phase {
	case Granted:
		status = metav1.ConditionTrue
	case Denied:
		status = metav1.ConditionFalse
	}
	reason := st.Reason
	if reason == "" {
		reason = string(st.Phase)
	}
	return meta.SetStatusCondition(conds, metav1.Condition{Type: ConditionQuotaGranted, Status: status, Reason: reason,
		Message: st.Message, ObservedGeneration: generation})
}

// WhoAmI is the user name cfg authenticates as, asked of the server (a
// SelfSubjectReview): a Claimer's Identity.
func WhoAmI(ctx context.Context, cfg *rest.Config) (string, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	r, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("asking the server who this client is (SelfSubjectReview): %w", err)
	}
	return r.Status.UserInfo.Username, nil
}

// Check reports whether owner's claim for requests of consumer's quota would
// be granted now, at every level of the hierarchy, taking nothing: a
// dry-run create of the claim, which quotaplane serve's engine evaluates as
// it would decide it (the same decision, the same refusal message). Granted
// or Denied; the next decision can differ only if something changes in
// between (another claim, a grant). A QuotaReview of Claim's claim gives
// the same answer, with the numbers of every level. It needs serve with its
// engine; another server answers an error saying so.
func (c *Claimer) Check(ctx context.Context, owner Owner, consumer quotav1alpha1.ConsumerRef, requests []quotav1alpha1.ResourceRequest) (Status, error) {
	if err := c.validate(owner); err != nil {
		return Status{}, err
	}
	cl := c.Claim(owner, consumer, requests)
	cl.Name, cl.GenerateName = "", c.Service+"-check-"
	res := c.Client.QuotaV1alpha1().RESTClient().Post().Namespace(c.Namespace).Resource("resourceclaims").
		Param("dryRun", metav1.DryRunAll).Body(cl).Do(ctx)
	err := res.Error()
	st := Status{Claim: types.NamespacedName{Namespace: c.Namespace}}
	switch {
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), quotav1alpha1.CheckWouldNotBeGranted):
		st.Phase, st.Reason, st.Message = Denied, "QuotaCheckDenied", err.Error()
		return st, nil
	case err != nil:
		return Status{}, err
	}
	for _, w := range res.Warnings() {
		if strings.HasPrefix(w.Text, quotav1alpha1.CheckWouldBeGranted) {
			st.Phase, st.Reason, st.Message = Granted, quotav1alpha1.ClaimReasonQuotaAvailable, w.Text
			return st, nil
		}
	}
	return Status{}, errors.New("the server accepted the dry-run claim without evaluating it: Check needs quotaplane serve with its quota engine")
}
