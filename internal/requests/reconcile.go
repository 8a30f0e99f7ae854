package requests

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// DecidedByQuotaplane is status.decision.decidedBy of what the controller
// decides itself: decreases applied at once, requests that can never be met.
const DecidedByQuotaplane = "quotaplane"

// settleRetry is how soon a request is looked at again while its bucket does
// not yet show an earlier request's grant.
const settleRetry = 200 * time.Millisecond

type reconciler struct {
	client   client.Client
	recorder record.EventRecorder
	requests toolscache.Store
	rules    toolscache.Store
	now      func() time.Time
}

func (r *reconciler) reconcile(ctx context.Context, k key) (time.Duration, error) {
	if k.rule {
		return 0, r.reconcileRule(ctx, k.name)
	}
	obj, ok, err := r.requests.GetByKey(k.namespace + "/" + k.name)
	if err != nil || !ok {
		return 0, err
	}
	qr := obj.(*quotav1alpha1.QuotaRequest).DeepCopy()
	switch qr.Status.State {
	case "":
		return r.accept(ctx, qr)
	case quotav1alpha1.QuotaRequestPending:
		if qr.Status.Decision == nil {
			if qr.Spec.Withdrawn {
				return 0, r.finish(ctx, qr, quotav1alpha1.QuotaRequestWithdrawn, "Withdrawn",
					"withdrawn by the tenant before it was decided; nothing changed")
			}
			return r.decide(ctx, qr)
		}
		return r.apply(ctx, qr)
	}
	return 0, nil
}

// accept records who asked and the bucket's numbers, and makes the request
// Pending; a request that can never be met is denied at once, saying why.
func (r *reconciler) accept(ctx context.Context, qr *quotav1alpha1.QuotaRequest) (time.Duration, error) {
	qr.Status.RequestedBy = qr.Annotations[quotav1alpha1.AnnotationRequestedBy]
	if problem, err := r.check(ctx, qr); err != nil {
		return 0, err
	} else if problem != "" {
		qr.Status.Decision = r.decision(qr, quotav1alpha1.VerdictDeny, DecidedByQuotaplane)
		qr.Status.Decision.Reason = problem
		return 0, r.finish(ctx, qr, quotav1alpha1.QuotaRequestDenied, "Invalid", "denied: "+problem)
	}
	b, _, err := r.bucket(ctx, qr.Namespace, askedFor(qr))
	if err != nil {
		return 0, err
	}
	if b == nil { // an earlier approval not in the bucket yet
		return settleRetry, nil
	}
	qr.Status.AtRequest = &quotav1alpha1.QuotaUsageSnapshot{Limit: b.Status.Limit, Allocated: b.Status.Allocated, At: r.timeNow()}
	qr.Status.State = quotav1alpha1.QuotaRequestPending
	qr.Status.Message = "waiting for a decision"
	r.condition(qr, metav1.ConditionFalse, "Pending", qr.Status.Message)
	if err := r.client.Status().Update(ctx, qr); err != nil {
		return 0, err
	}
	r.recorder.Eventf(qr, corev1.EventTypeNormal, "Submitted", "%s asks for a %s limit of %d for %s %s (limit %d, allocated %d now)",
		orSomeone(qr.Status.RequestedBy), qr.Spec.ResourceType, qr.Spec.RequestedLimit, qr.Spec.ConsumerRef.Kind, qr.Spec.ConsumerRef.Name,
		b.Status.Limit, b.Status.Allocated)
	return 0, nil
}

// decide decides what needs no person: a decrease is applied at once (or
// refused, saying by how much), an approval rule may approve; the rest waits.
func (r *reconciler) decide(ctx context.Context, qr *quotav1alpha1.QuotaRequest) (time.Duration, error) {
	b, grants, err := r.bucket(ctx, qr.Namespace, askedFor(qr))
	if err != nil {
		return 0, err
	}
	if b == nil {
		return settleRetry, nil
	}
	// A decrease is a request below the limit when it was asked; one the
	// limit has risen past since (another approval) is still an increase,
	// and waits for staff like any other.
	asked := b.Status.Limit
	if qr.Status.AtRequest != nil {
		asked = qr.Status.AtRequest.Limit
	}
	l := limitsOf(b)
	if refusal := temporaryDecreaseRefusal(qr, l); refusal != "" {
		qr.Status.Decision = r.decision(qr, quotav1alpha1.VerdictDeny, DecidedByQuotaplane)
		qr.Status.Decision.Reason = refusal
		return 0, r.finish(ctx, qr, quotav1alpha1.QuotaRequestDenied, "Refused", "refused: "+refusal)
	}
	if !temporary(qr) && qr.Spec.RequestedLimit < asked && qr.Spec.RequestedLimit < l.permanent {
		// Planned against the permanent limit: a decrease never lowers a
		// windowed grant (bucket lists none of them).
		plan, perr := quota.PlanLimitChange(l.permanent, b.Status.Allocated, qr.Spec.RequestedLimit, grants)
		if perr != nil {
			qr.Status.Decision = r.decision(qr, quotav1alpha1.VerdictDeny, DecidedByQuotaplane)
			qr.Status.Decision.Reason = perr.Error()
			return 0, r.finish(ctx, qr, quotav1alpha1.QuotaRequestDenied, "Refused", "refused: "+perr.Error())
		}
		qr.Status.Decision = r.decision(qr, quotav1alpha1.VerdictApprove, DecidedByQuotaplane)
		qr.Status.Decision.Reason = "a decrease is applied at once"
		r.record(qr, l.permanent, plan, nil)
		if err := r.client.Status().Update(ctx, qr); err != nil {
			return 0, err
		}
		return r.apply(ctx, qr)
	}
	rule, err := r.approvingRule(ctx, qr, b)
	if err != nil {
		return 0, err
	}
	if rule == "" {
		msg := "waiting for staff: no approval rule allows it"
		if qr.Status.Message != msg {
			qr.Status.Message = msg
			return 0, r.client.Status().Update(ctx, qr)
		}
		return 0, nil
	}
	qr.Status.Decision = r.decision(qr, quotav1alpha1.VerdictApprove, "rule:"+rule)
	qr.Status.Decision.Rule = rule
	if err := r.client.Status().Update(ctx, qr); err != nil {
		return 0, err
	}
	return r.apply(ctx, qr)
}

// apply carries out a decision: it records the plan (the limit now, the
// grant to make or lower) before acting, then acts idempotently, then says
// the request is Approved or Denied. What it plans and grants is the
// decision's subject (decidedFor), never the spec as it is now.
func (r *reconciler) apply(ctx context.Context, qr *quotav1alpha1.QuotaRequest) (time.Duration, error) {
	d := qr.Status.Decision
	if d.Verdict == quotav1alpha1.VerdictDeny {
		return 0, r.finish(ctx, qr, quotav1alpha1.QuotaRequestDenied, "Denied",
			fmt.Sprintf("denied by %s: %s", orSomeone(d.DecidedBy), d.Reason))
	}
	what := decidedFor(qr)
	if asked := askedFor(qr); !what.same(asked) {
		// serve's admission records the subject from the stored spec; a
		// decision for anything else was written around it (through an
		// API server without that admission): it grants nothing.
		return 0, r.finish(ctx, qr, quotav1alpha1.QuotaRequestDenied, "DecisionNotForThisRequest",
			fmt.Sprintf("the decision by %s is for %s %s, %s%s, but the request asks for %s %s, %s%s: a decision grants only what was asked; decide again on a new request",
				orSomeone(d.DecidedBy), what.consumer.Kind, what.consumer.Name, what.resourceType, dimsKey(what.dimensions),
				asked.consumer.Kind, asked.consumer.Name, asked.resourceType, dimsKey(asked.dimensions)))
	}
	if qr.Status.LimitAtDecision == nil {
		b, grants, err := r.bucket(ctx, qr.Namespace, what)
		if err != nil {
			return 0, err
		}
		if b == nil {
			return settleRetry, nil
		}
		target := qr.Spec.RequestedLimit
		if d.GrantedLimit != nil {
			target = *d.GrantedLimit
		}
		// An approval never lowers the limit: another approval may have
		// raised it past this one since it was asked. (A decrease is
		// planned where it is decided, in decide.) A temporary one is an
		// expiring grant on top of the limit now; a permanent one is
		// planned against the limit without windowed grants.
		l := limitsOf(b)
		plan, until, err := planApproval(qr, l, target, grants, r.now())
		if err != nil {
			return 0, r.finish(ctx, qr, quotav1alpha1.QuotaRequestDenied, "Refused", "approved, but it cannot be applied: "+err.Error())
		}
		r.record(qr, l.base(qr), plan, until)
		if err := r.client.Status().Update(ctx, qr); err != nil {
			return 0, err
		}
	}
	if g := qr.Status.Grant; g != nil {
		if msg, err := r.ensureGrant(ctx, qr, what, g); err != nil || msg != "" {
			if msg != "" && qr.Status.Message != msg {
				qr.Status.Message = msg
				return time.Minute, r.client.Status().Update(ctx, qr)
			}
			return time.Minute, err
		}
	}
	for _, g := range qr.Status.ReducedGrants {
		if err := r.lower(ctx, qr.Namespace, g); err != nil {
			return 0, err
		}
	}
	from, to := *qr.Status.LimitAtDecision, *qr.Status.GrantedLimit
	var how string
	switch {
	case qr.Status.Grant != nil && qr.Status.Grant.ExpiresAt != nil:
		how = fmt.Sprintf("limit %d -> %d until %s (ResourceGrant %s, +%d, expiring then)", from, to,
			qr.Status.Grant.ExpiresAt.UTC().Format(time.RFC3339), qr.Status.Grant.Name, qr.Status.Grant.Amount)
	case qr.Status.Grant != nil:
		how = fmt.Sprintf("limit %d -> %d (ResourceGrant %s, +%d)", from, to, qr.Status.Grant.Name, qr.Status.Grant.Amount)
	case len(qr.Status.ReducedGrants) > 0:
		how = fmt.Sprintf("limit %d -> %d (earlier requests' grants lowered)", from, to)
	default:
		how = fmt.Sprintf("the limit was already %d", from)
	}
	if to < qr.Spec.RequestedLimit {
		how += fmt.Sprintf("; %d of the %d asked", to, qr.Spec.RequestedLimit)
	}
	return 0, r.finish(ctx, qr, quotav1alpha1.QuotaRequestApproved, "Approved", "approved by "+orSomeone(d.DecidedBy)+": "+how)
}

// record writes the plan into the status, before it is carried out.
func (r *reconciler) record(qr *quotav1alpha1.QuotaRequest, limit int64, plan quota.LimitChange, until *metav1.Time) {
	qr.Status.LimitAtDecision = &limit
	target := plan.Target
	qr.Status.GrantedLimit = &target
	if plan.Grant > 0 {
		qr.Status.Grant = &quotav1alpha1.QuotaRequestGrant{Name: GrantName(qr), Amount: plan.Grant, ExpiresAt: until}
	}
	for _, l := range plan.Lowered {
		qr.Status.ReducedGrants = append(qr.Status.ReducedGrants, quotav1alpha1.QuotaRequestGrant{Name: l.Name, Amount: l.Amount})
	}
}

// finish ends the request in state, with an Event.
func (r *reconciler) finish(ctx context.Context, qr *quotav1alpha1.QuotaRequest, state quotav1alpha1.QuotaRequestState, reason, msg string) error {
	qr.Status.State = state
	qr.Status.Message = msg
	r.condition(qr, metav1.ConditionTrue, reason, msg)
	if err := r.client.Status().Update(ctx, qr); err != nil {
		return err
	}
	kind := corev1.EventTypeNormal
	if state == quotav1alpha1.QuotaRequestDenied {
		kind = corev1.EventTypeWarning
	}
	r.recorder.Event(qr, kind, "QuotaRequest"+string(state), msg)
	klog.FromContext(ctx).V(2).Info("Quota request decided", "request", klog.KObj(qr), "state", state, "message", msg)
	return nil
}

func (r *reconciler) condition(qr *quotav1alpha1.QuotaRequest, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&qr.Status.Conditions, metav1.Condition{Type: quotav1alpha1.QuotaRequestCondition, Status: status,
		Reason: reason, Message: msg, ObservedGeneration: qr.Generation})
}

func (r *reconciler) timeNow() *metav1.Time {
	t := metav1.NewTime(r.now())
	return &t
}

// decision is a decision the controller makes itself, on the request as it
// was asked: its consumer, resource type and dimensions are recorded with
// the verdict.
func (r *reconciler) decision(qr *quotav1alpha1.QuotaRequest, verdict quotav1alpha1.QuotaRequestVerdict, by string) *quotav1alpha1.QuotaRequestDecision {
	s := askedFor(qr)
	c := s.consumer
	return &quotav1alpha1.QuotaRequestDecision{Verdict: verdict, DecidedBy: by, DecidedAt: r.timeNow(),
		ConsumerRef: &c, ResourceType: s.resourceType, Dimensions: s.dimensions}
}

// subject is what a limit is asked or decided for: one consumer's bucket.
type subject struct {
	consumer     quotav1alpha1.ConsumerRef
	resourceType quotav1alpha1.ResourceType
	dimensions   []quotav1alpha1.Dimension
}

// same reports whether two subjects name one bucket.
func (s subject) same(o subject) bool {
	return s.consumer == o.consumer && s.resourceType == o.resourceType && dimsKey(s.dimensions) == dimsKey(o.dimensions)
}

// askedFor is the request's subject as its spec says (immutable from create).
func askedFor(qr *quotav1alpha1.QuotaRequest) subject {
	return subject{consumer: qr.Spec.ConsumerRef, resourceType: qr.Spec.ResourceType, dimensions: qr.Spec.Dimensions}
}

// decidedFor is the subject its decision recorded. A decision without one
// (written through an API server without serve's admission, where the
// schema still keeps the spec as created) is for what was asked.
func decidedFor(qr *quotav1alpha1.QuotaRequest) subject {
	d := qr.Status.Decision
	if d == nil || d.ConsumerRef == nil || d.ResourceType == "" {
		return askedFor(qr)
	}
	return subject{consumer: *d.ConsumerRef, resourceType: d.ResourceType, dimensions: d.Dimensions}
}

// GrantNamePrefix begins the name of every ResourceGrant a request makes.
// serve's admission reserves such names to the request controller.
const GrantNamePrefix = "quota-request-"

// GrantName is the name of the ResourceGrant an approved request makes.
func GrantName(qr *quotav1alpha1.QuotaRequest) string {
	name := GrantNamePrefix + qr.Name
	if len(name) > 253 {
		name = name[:253]
	}
	return strings.TrimRight(name, "-.")
}

// ensureGrant creates the request's grant, for what was decided; one
// already there must be this request's. msg, when set, says why it cannot be.
func (r *reconciler) ensureGrant(ctx context.Context, qr *quotav1alpha1.QuotaRequest, what subject, g *quotav1alpha1.QuotaRequestGrant) (string, error) {
	grant := &quotav1alpha1.ResourceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: qr.Namespace, Name: g.Name,
			Labels:      map[string]string{quotav1alpha1.LabelQuotaRequest: qr.Name},
			Annotations: map[string]string{quotav1alpha1.LabelQuotaRequest + "-uid": string(qr.UID)}},
		Spec: quotav1alpha1.ResourceGrantSpec{ConsumerRef: what.consumer, ExpiresAt: g.ExpiresAt, Allowances: []quotav1alpha1.Allowance{{
			ResourceType: what.resourceType,
			Buckets:      []quotav1alpha1.GrantBucket{{Amount: g.Amount, Dimensions: what.dimensions}},
		}}},
	}
	err := r.client.Create(ctx, grant)
	if !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	have := &quotav1alpha1.ResourceGrant{}
	if err := r.client.Get(ctx, client.ObjectKeyFromObject(grant), have); err != nil {
		return "", err
	}
	a := have.Spec.Allowances
	if have.Annotations[quotav1alpha1.LabelQuotaRequest+"-uid"] != string(qr.UID) || have.Spec.ConsumerRef != what.consumer || !have.Spec.ExpiresAt.Equal(g.ExpiresAt) ||
		len(a) != 1 || a[0].ResourceType != what.resourceType || len(a[0].Buckets) != 1 || dimsKey(a[0].Buckets[0].Dimensions) != dimsKey(what.dimensions) {
		return fmt.Sprintf("approved, but ResourceGrant %s/%s exists and is not this request's grant of %s for %s %s: a cluster administrator (system:masters) may delete it, and the approval is applied",
			qr.Namespace, g.Name, what.resourceType, what.consumer.Kind, what.consumer.Name), nil
	}
	return "", nil
}

// lower sets an earlier request's grant to its planned amount (deleting it
// at zero). Setting, not subtracting, makes a repeat harmless.
func (r *reconciler) lower(ctx context.Context, namespace string, g quotav1alpha1.QuotaRequestGrant) error {
	grant := &quotav1alpha1.ResourceGrant{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: g.Name}, grant); err != nil {
		return client.IgnoreNotFound(err)
	}
	if g.Amount == 0 {
		return client.IgnoreNotFound(r.client.Delete(ctx, grant, client.Preconditions{UID: &grant.UID}))
	}
	if len(grant.Spec.Allowances) != 1 || len(grant.Spec.Allowances[0].Buckets) != 1 {
		return fmt.Errorf("ResourceGrant %s/%s is not one request's grant any more", namespace, g.Name)
	}
	if grant.Spec.Allowances[0].Buckets[0].Amount == g.Amount {
		return nil
	}
	grant.Spec.Allowances[0].Buckets[0].Amount = g.Amount
	return r.client.Update(ctx, grant)
}

// bucket reads the consumer's bucket live, with the grants earlier requests
// made for it. It returns a nil bucket (look again soon) while the bucket
// does not show each of those grants at its current amount, so that a limit
// is never read from before an earlier approval. No bucket yet is a limit
// and an allocation of zero.
func (r *reconciler) bucket(ctx context.Context, namespace string, what subject) (*quotav1alpha1.AllowanceBucket, []quota.RequestGrant, error) {
	c := what.consumer
	id := quota.BucketID{Consumer: quota.ConsumerID{APIGroup: c.APIGroup, Kind: c.Kind, Namespace: c.Namespace, Name: c.Name},
		ResourceType: string(what.resourceType), Dims: dimsKey(what.dimensions)}
	b := &quotav1alpha1.AllowanceBucket{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: quota.BucketName(id)}, b)
	if apierrors.IsNotFound(err) {
		b, err = &quotav1alpha1.AllowanceBucket{}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	list := &quotav1alpha1.ResourceGrantList{}
	if err := r.client.List(ctx, list, client.InNamespace(namespace), client.HasLabels{quotav1alpha1.LabelQuotaRequest}); err != nil {
		return nil, nil, err
	}
	shown := map[string]quotav1alpha1.ContributingGrantRef{}
	for _, ref := range b.Status.ContributingGrantRefs {
		shown[ref.Name] = ref
	}
	var grants []quota.RequestGrant
	for _, g := range list.Items {
		if g.DeletionTimestamp != nil || len(g.Spec.Allowances) != 1 || len(g.Spec.Allowances[0].Buckets) != 1 ||
			g.Spec.ConsumerRef != c || g.Spec.Allowances[0].ResourceType != what.resourceType ||
			dimsKey(g.Spec.Allowances[0].Buckets[0].Dimensions) != id.Dims {
			continue
		}
		if windowed(&g) && !counting(&g) {
			continue // not yet started, or expired: not in the bucket
		}
		amount := g.Spec.Allowances[0].Buckets[0].Amount
		if ref, ok := shown[g.Name]; amount > 0 && (!ok || ref.Amount != amount || ref.LastObservedGeneration < g.Generation) {
			return nil, nil, nil
		}
		if windowed(&g) {
			continue // a temporary increase: never lowered by a decrease
		}
		grants = append(grants, quota.RequestGrant{Name: g.Name, Amount: amount, Order: g.CreationTimestamp.UnixNano()})
	}
	return b, grants, nil
}

func dimsKey(d []quotav1alpha1.Dimension) string {
	pairs := make([]quota.Dim, 0, len(d))
	for _, x := range d {
		pairs = append(pairs, quota.Dim{Key: x.Key, Value: x.Value})
	}
	return quota.NewDimensions(pairs...).Key()
}

// check says why a request can never be met ("" when it can).
func (r *reconciler) check(ctx context.Context, qr *quotav1alpha1.QuotaRequest) (string, error) {
	ferr, err := Check(ctx, clientLookup{r.client}, qr)
	if err != nil || ferr == nil {
		return "", err
	}
	return ferr.Field + ": " + ferr.Detail, nil
}

// clientLookup is a Lookup through a controller-runtime client.
type clientLookup struct{ cl client.Reader }

func (l clientLookup) ProjectOrganization(ctx context.Context, name string) (string, bool, error) {
	p := &rmv1alpha1.Project{}
	err := l.cl.Get(ctx, client.ObjectKey{Name: name}, p)
	if apierrors.IsNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return ProjectOrganization(p), true, nil
}

func (l clientLookup) Registrations(ctx context.Context) ([]quotav1alpha1.ResourceRegistration, error) {
	regs := &quotav1alpha1.ResourceRegistrationList{}
	if err := l.cl.List(ctx, regs); err != nil {
		return nil, err
	}
	return regs.Items, nil
}

// approvingRule evaluates the approval rules on the request.
func (r *reconciler) approvingRule(ctx context.Context, qr *quotav1alpha1.QuotaRequest, b *quotav1alpha1.AllowanceBucket) (string, error) {
	var rules []compiledRule
	for _, o := range r.rules.List() {
		c, err := compileRule(o.(*quotav1alpha1.QuotaApprovalRule))
		if err == nil {
			rules = append(rules, c)
		}
	}
	if len(rules) == 0 {
		return "", nil
	}
	org, _ := strings.CutPrefix(qr.Namespace, rmv1alpha1.OrganizationNamespacePrefix)
	organization := &rmv1alpha1.Organization{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: org}, organization); err != nil {
		return "", err
	}
	var consumer any = organization
	if qr.Spec.ConsumerRef.Kind == "Project" {
		p := &rmv1alpha1.Project{}
		if err := r.client.Get(ctx, client.ObjectKey{Name: qr.Spec.ConsumerRef.Name}, p); err != nil {
			return "", err
		}
		consumer = p
	}
	in := ruleInput{request: toMap(qr), consumer: toMap(consumer), organization: toMap(organization),
		usage: map[string]int64{"limit": b.Status.Limit, "allocated": b.Status.Allocated, "available": b.Status.Limit - b.Status.Allocated}}
	name, errs := approvingRule(rules, string(qr.Spec.ResourceType), in)
	if len(errs) > 0 {
		klog.FromContext(ctx).V(2).Info("Approval rules failed to evaluate", "request", klog.KObj(qr), "err", errors.Join(errs...))
	}
	return name, nil
}

// reconcileRule says on a rule whether its expression compiles.
func (r *reconciler) reconcileRule(ctx context.Context, name string) error {
	obj, ok, err := r.rules.GetByKey(name)
	if err != nil || !ok {
		return err
	}
	rule := obj.(*quotav1alpha1.QuotaApprovalRule).DeepCopy()
	cond := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Compiled",
		Message: "the expression compiles; requests it is true for are approved", ObservedGeneration: rule.Generation}
	if _, err := compileRule(rule); err != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "InvalidExpression", err.Error()+"; the rule approves nothing until it is fixed"
	}
	old := meta.FindStatusCondition(rule.Status.Conditions, "Ready")
	if old != nil && old.Status == cond.Status && old.Message == cond.Message && rule.Status.ObservedGeneration == rule.Generation {
		return nil
	}
	meta.SetStatusCondition(&rule.Status.Conditions, cond)
	rule.Status.ObservedGeneration = rule.Generation
	return r.client.Status().Update(ctx, rule)
}

func orSomeone(s string) string {
	if s == "" {
		return "someone"
	}
	return s
}
