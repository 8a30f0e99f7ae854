package existing

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/charge/walk"
	"github.com/quotaplane/quotaplane/internal/engine/admit"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/policy"
	"github.com/quotaplane/quotaplane/internal/policy/governed"
	"github.com/quotaplane/quotaplane/internal/reconcile"
)

// batchSize is how many claims one ChargeExisting call decides under the
// cache's lock: admission waits for the lock no longer than one batch takes.
const batchSize = 100

// chargers bounds the batches being charged at once.
const chargers = 4

// pageSize is how many objects one list request returns.
const pageSize = 500

// busyRetry is how soon objects found busy (another change of them being
// charged) are looked at again.
const busyRetry = 2 * time.Second

// inFlightGrace is how long after the engine first sees a policy version
// it lists the objects: a create or update admitted just before admission
// knew that version (so not charged by it) is stored by then, and is listed
// as stored. The API server stores an admitted object within milliseconds.
const inFlightGrace = 2 * time.Second

// maxNamed bounds the objects a status message names.
const maxNamed = 5

// Charger charges, for each policy, the existing objects its enforced
// generation governs. Its dependencies are function fields so that it is
// tested without a server.
type Charger struct {
	Queue reconcile.Queue[string]
	// Policy reads a policy from the term's informer.
	Policy func(name string) (*quotav1alpha1.ClaimCreationPolicy, bool, error)
	// Mapper finds the resource of a trigger kind.
	Mapper meta.ResettableRESTMapper
	// Dynamic lists the objects.
	Dynamic dynamic.Interface
	// Charge is admit.Term.ChargeExisting of the term.
	Charge func(ctx context.Context, policy string, claims []*quotav1alpha1.ResourceClaim) (admit.ExistingResult, error)
	// NamespaceOpen says why a namespace cannot hold claims, nil when it can.
	NamespaceOpen func(ctx context.Context, ns string) error
	// Units converts amounts written as quantities.
	Units policy.Units
	// Client writes the policy's status.
	Client client.Client
	// Events records the Event on the policy.
	Events func() record.EventRecorder
	// SystemNamespace holds claims of cluster-scoped objects.
	SystemNamespace string
	// Exemptions are the objects no policy charges (the same as admission's).
	Exemptions governed.Exemptions
	// Planes lists the control planes whose objects are charged as the
	// root's are (nil: the root only); PlaneDynamic lists a plane's objects.
	Planes       func(ctx context.Context) ([]planes.Listed, error)
	PlaneDynamic func(p planes.Plane) (dynamic.Interface, error)

	// ImpactEvery is how often a trial generation's status.impact is
	// computed again while it runs (DefaultImpactEvery when 0).
	ImpactEvery time.Duration

	walkerOnce sync.Once
	walk       *walk.Walker
	mu         sync.Mutex
	// passes keep counts across the attempts of one pass (objects found
	// busy are charged by a later attempt).
	passes map[string]*pass
}

// DefaultImpactEvery is how often a trial's impact is computed again.
const DefaultImpactEvery = time.Minute

// pass is one pass over a policy version's objects.
type pass struct {
	version   string
	seen      time.Time
	objects   int64
	charged   int64
	overLimit int64
	// mine are the objects this pass charged: a later attempt finds them
	// holding a claim, and counts them as charged, not as held.
	mine map[string]bool
	// others are the objects an attempt found holding a claim another
	// made (admission's): a later attempt counts them as held without
	// evaluating them again, as it does the ones in mine. A stored claim
	// of a live object is not deleted by anyone but the engine, so neither
	// needs charging again while the pass lasts; an attempt retried while
	// creates go on evaluates only the objects not settled yet.
	others     map[string]bool
	held       int64
	notCharged int64
	reasons    []string
	// unexamined are the control planes not served when listed.
	unexamined []string
}

func (p *pass) refuse(object, why string) {
	p.notCharged++
	if len(p.reasons) < maxNamed {
		p.reasons = append(p.reasons, object+": "+why)
	}
}

// NewQueue is the queue a Charger works on, by policy name.
func NewQueue() reconcile.Queue[string] {
	return reconcile.NewQueue[string](100*time.Millisecond, 30*time.Second)
}

// Reconcile charges the existing objects of one policy's enforced
// generation, unless status.existingObjects says that was done for it (and
// for the latest charge-existing request).
func (c *Charger) Reconcile(ctx context.Context, name string) error {
	cp, ok, err := c.Policy(name)
	if err != nil || !ok {
		return err
	}
	e := cp.Status.Enforced
	if cp.Spec.Disabled {
		return nil
	}
	// Only once the engine judged the current generation: valid, it is the
	// enforced one; invalid, the last valid one stays enforced. Before, the
	// enforced generation may be about to change (its status write queues
	// the policy again).
	ready := meta.FindStatusCondition(cp.Status.Conditions, quotav1alpha1.PolicyConditionReady)
	if ready == nil || ready.ObservedGeneration != cp.Generation || cp.Status.ObservedGeneration != cp.Generation {
		return nil
	}
	if err := c.reviewTrial(ctx, cp); err != nil {
		return err
	}
	if e == nil {
		return nil
	}
	request := cp.Annotations[quotav1alpha1.AnnotationChargeExisting]
	if st := cp.Status.ExistingObjects; st != nil && st.Generation == e.Generation && st.Request == request {
		return nil
	}
	version := fmt.Sprintf("%s/%d/%s", cp.UID, e.Generation, request)
	p := c.pass(name, version)
	if wait := inFlightGrace - time.Since(p.seen); wait > 0 {
		c.Queue.AddAfter(name, wait)
		return nil
	}
	busy, err := c.charge(ctx, cp, p)
	if err != nil {
		return err
	}
	if busy > 0 {
		klog.FromContext(ctx).V(2).Info("Existing objects are being charged by a create or update; charging them again shortly", "policy", name, "objects", busy)
		c.Queue.AddAfter(name, busyRetry)
		return nil
	}
	c.mu.Lock()
	delete(c.passes, name)
	c.mu.Unlock()
	return c.report(ctx, cp, e.Generation, request, p)
}

func (c *Charger) pass(name, version string) *pass {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.passes == nil {
		c.passes = map[string]*pass{}
	}
	p := c.passes[name]
	if p == nil || p.version != version {
		p = &pass{version: version, seen: time.Now(), mine: map[string]bool{}, others: map[string]bool{}}
		c.passes[name] = p
	}
	// Each attempt examines every object again; what it charges adds up.
	p.objects, p.held, p.notCharged, p.reasons, p.unexamined = 0, 0, 0, nil, nil
	return p
}

// charge lists the trigger kind's objects and charges those the policy
// governs; it returns how many were busy.
func (c *Charger) charge(ctx context.Context, cp *quotav1alpha1.ClaimCreationPolicy, p *pass) (int, error) {
	w := c.walker()
	e := cp.Status.Enforced
	v := walk.Version{Name: cp.Name, Generation: e.Generation, Trigger: e.Trigger, Target: e.Target}
	compiled, err := walk.Compile(v)
	if err != nil {
		p.refuse("the policy", "generation "+fmt.Sprint(e.Generation)+" does not compile: "+err.Error())
		return 0, nil
	}
	k, err := w.KindOf(ctx, e.Trigger.Resource)
	if err != nil {
		return 0, err
	}
	if k.GVR.Empty() {
		return 0, nil // not served: no object of it exists
	}
	gvr, gvk := k.GVR, k.GVK
	open := map[string]error{}
	busy := 0
	var batch []*quotav1alpha1.ResourceClaim
	// Batches are charged by chargers in flight at once, so that their
	// journal writes share group commits while the next objects are read
	// and evaluated.
	var mu sync.Mutex
	var failed error
	inFlight := make(chan struct{}, chargers)
	var wg sync.WaitGroup
	charge := func(batch []*quotav1alpha1.ResourceClaim) {
		defer func() { <-inFlight; wg.Done() }()
		res, err := c.Charge(ctx, cp.Name, batch)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failed = err
			return
		}
		p.charged += int64(len(res.Charged))
		p.overLimit += int64(res.OverLimit)
		busy += len(res.Busy)
		skipped := map[string]bool{}
		for _, uid := range res.Held {
			skipped[uid] = true
			if !p.mine[uid] {
				p.held++
				p.others[uid] = true
			}
		}
		for _, uid := range res.Busy {
			skipped[uid] = true // not charged by this attempt either
		}
		for _, cl := range batch {
			uid := cl.Annotations[quotav1alpha1.AnnotationResourceUID]
			if why, refused := res.Refused[uid]; refused {
				p.refuse(walk.ObjectName(gvk.Kind, cl.Spec.ResourceRef.Namespace, cl.Spec.ResourceRef.Name)+inPlane(cl), why)
			} else if !skipped[uid] {
				p.mine[uid] = true
			}
		}
	}
	flush := func() error {
		if len(batch) > 0 {
			inFlight <- struct{}{}
			wg.Add(1)
			go charge(batch)
			batch = nil
		}
		mu.Lock()
		defer mu.Unlock()
		return failed
	}
	wait := func() (int, error) {
		wg.Wait()
		return busy, failed
	}
	defer wg.Wait()
	sources, unexamined, err := w.Sources(ctx, gvr.GroupResource())
	if err != nil {
		return 0, err
	}
	p.unexamined = unexamined
	for _, src := range sources {
		err := src.Each(ctx, gvr, func(obj *unstructured.Unstructured) error {
			mu.Lock()
			if uid := string(obj.GetUID()); p.mine[uid] || p.others[uid] {
				p.objects++
				if p.others[uid] {
					p.held++
				}
				mu.Unlock()
				return nil
			}
			mu.Unlock()
			claim, refused := w.ClaimFor(ctx, v, compiled, k, src.Plane, obj, open)
			mu.Lock()
			p.objects++
			if refused != nil {
				p.refuse(walk.ObjectName(gvk.Kind, obj.GetNamespace(), obj.GetName())+src.Where(), refused.Why)
			}
			mu.Unlock()
			if refused != nil || claim == nil {
				return nil
			}
			batch = append(batch, claim)
			if len(batch) == batchSize {
				return flush()
			}
			return nil
		})
		if err != nil {
			wg.Wait()
			return 0, err
		}
	}
	if err := flush(); err != nil {
		return 0, err
	}
	return wait()
}

// report writes status.existingObjects and the Event.
func (c *Charger) report(ctx context.Context, cp *quotav1alpha1.ClaimCreationPolicy, generation int64, request string, p *pass) error {
	kind := cp.Status.Enforced.Trigger.Resource.Kind
	msg := fmt.Sprintf("%d existing %s objects examined for generation %d, %d charged", p.objects, kind, generation, p.charged)
	if p.overLimit > 0 {
		msg += fmt.Sprintf(", %d of them beyond a limit (granted anyway: the objects exist; the buckets show they are over, and new creates are refused until usage falls below the limit)", p.overLimit)
	}
	if p.held > 0 {
		msg += fmt.Sprintf("; %d already held a claim of this policy (charged when created or updated, or by a pass for an earlier generation) and were left as they are", p.held)
	}
	if len(p.unexamined) > 0 {
		msg += fmt.Sprintf("; control planes not examined, as they are not served (charge their objects once they are: set the annotation %s on this policy to a new value): %s",
			quotav1alpha1.AnnotationChargeExisting, strings.Join(p.unexamined, "; "))
	}
	if p.notCharged > 0 {
		msg += fmt.Sprintf("; %d not charged — %s", p.notCharged, strings.Join(p.reasons, "; "))
		if p.notCharged > int64(len(p.reasons)) {
			msg += fmt.Sprintf("; and %d more", p.notCharged-int64(len(p.reasons)))
		}
	}
	if len(msg) > 4000 {
		msg = msg[:4000] + "…"
	}
	now := metav1.Now()
	updated := cp.DeepCopy()
	updated.Status.ExistingObjects = &quotav1alpha1.ExistingObjectsStatus{Generation: generation, Request: request, Objects: p.objects,
		Charged: p.charged, OverLimit: p.overLimit, NotCharged: p.notCharged, Message: msg, CompletionTime: &now}
	if err := c.Client.Status().Patch(ctx, updated, client.MergeFrom(cp)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("writing status.existingObjects of ClaimCreationPolicy %s: %w", cp.Name, err)
	}
	if c.Events == nil || (p.charged == 0 && p.notCharged == 0 && len(p.unexamined) == 0) {
		return nil
	}
	typ, reason := corev1.EventTypeNormal, "ChargedExistingObjects"
	if p.overLimit > 0 || p.notCharged > 0 || len(p.unexamined) > 0 {
		typ = corev1.EventTypeWarning
	}
	if p.overLimit > 0 {
		reason = "ExistingObjectsOverLimit"
	}
	c.Events().Event(cp, typ, reason, msg)
	return nil
}

// walker is the Walker over the charger's clients.
func (c *Charger) walker() *walk.Walker {
	c.walkerOnce.Do(func() {
		c.walk = &walk.Walker{Mapper: c.Mapper, Dynamic: c.Dynamic, Planes: c.Planes, PlaneDynamic: c.PlaneDynamic,
			NamespaceOpen: c.NamespaceOpen, Units: c.Units, SystemNamespace: c.SystemNamespace, Exemptions: c.Exemptions}
	})
	return c.walk
}

// reviewTrial writes status.impact for the generation on trial (mode Warn or
// Audit): what it would do to the objects that exist if it came into force,
// computed again every ImpactEvery while it runs. It charges nothing.
func (c *Charger) reviewTrial(ctx context.Context, cp *quotav1alpha1.ClaimCreationPolicy) error {
	t := cp.Status.Trial
	if t == nil {
		return nil
	}
	every := c.ImpactEvery
	if every <= 0 {
		every = DefaultImpactEvery
	}
	if im := cp.Status.Impact; im != nil && im.Generation == t.Generation && im.CompletionTime != nil {
		if left := every - time.Since(im.CompletionTime.Time); left > 0 {
			c.Queue.AddAfter(cp.Name, left)
			return nil
		}
	}
	w := c.walker()
	reading, err := w.Reading(ctx, cp.Name)
	if err != nil {
		return err
	}
	res, err := w.Preview(ctx, walk.Version{Name: cp.Name, Generation: t.Generation, Trigger: t.Trigger, Target: t.Target}, reading)
	if err != nil {
		return fmt.Errorf("evaluating generation %d of ClaimCreationPolicy %s on the objects that exist: %w", t.Generation, cp.Name, err)
	}
	impact := res.Summary
	impact.Mode = t.Mode
	updated := cp.DeepCopy()
	updated.Status.Impact = &impact
	// Only onto the policy as read: an edit since (a switch to Enforce
	// that ended the trial) is not overwritten with a stale impact; the
	// edit queues the policy again.
	if err := c.Client.Status().Patch(ctx, updated, client.MergeFromWithOptions(cp, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return fmt.Errorf("writing status.impact of ClaimCreationPolicy %s: %w", cp.Name, err)
	}
	c.Queue.AddAfter(cp.Name, every)
	return nil
}
