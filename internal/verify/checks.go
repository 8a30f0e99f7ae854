package verify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/kinds"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/policy"
	"github.com/quotaplane/quotaplane/internal/policy/governed"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// newTermRepair is how every difference between the engine's memory and
// storage is repaired: a new term rebuilds the engine from storage.
const newTermRepair = "start a new engine term, which rebuilds every bucket from the stored grants and claims and settles every grant in flight first: quotaplane verify --repair asks the engine for one (ConfigMap %s/" + formats.RebuildName + "); or restart quotaplane serve (with several replicas, the one holding the Lease %s/%s)"

// checkBuckets compares every stored AllowanceBucket with the bucket the
// rebuilt engine gives for its consumer, resource type and dimensions: the
// limit is the sum of the consumer's Active grants, allocated the sum of its
// granted claims and grants in flight. Buckets the engine gives that are not
// stored, and stored buckets it does not give, are reported too.
func (v *verifier) checkBuckets(ctx context.Context, s *reading, r *Report) error {
	placement := quota.Placement{SystemNamespace: v.o.SystemNamespace, OrganizationOf: func(p string) string { return s.projectOrgs[p] }}
	repair := fmt.Sprintf(newTermRepair, v.o.SystemNamespace, v.o.SystemNamespace, formats.LeaseName)
	seen := map[quota.BucketID]bool{}
	err := listQuota(ctx, v, func() *quotav1alpha1.AllowanceBucketList { return &quotav1alpha1.AllowanceBucketList{} }, func(list *quotav1alpha1.AllowanceBucketList) error {
		for i := range list.Items {
			b := &list.Items[i]
			if b.Labels[quotav1alpha1.LabelProjectedFrom] != "" {
				continue // a group's copy in a member's namespace; its own bucket is checked
			}
			id := convert.BucketID(b)
			where := nsName(b.Namespace, b.Name)
			want, exists := s.eng.Bucket(id)
			if !exists || b.Namespace != placement.Namespace(id.Consumer) || b.Name != quota.BucketName(id) {
				why := "no grant or claim gives it"
				if exists {
					why = fmt.Sprintf("the engine keeps that bucket as %s", nsName(placement.Namespace(id.Consumer), quota.BucketName(id)))
				}
				r.Add(Discrepancy{Check: CheckBucketStale, ID: string(CheckBucketStale) + "/" + where,
					Problem: fmt.Sprintf("AllowanceBucket %s (%s) is stored but %s", where, describeBucket(id), why),
					Repair:  fmt.Sprintf("delete it (kubectl delete allowancebucket -n %s %s; quotaplane verify --repair does); the engine writes every bucket it needs", b.Namespace, b.Name),
					Target:  &Target{Kind: "AllowanceBucket", Namespace: b.Namespace, Name: b.Name, UID: string(b.UID)}})
				continue
			}
			seen[id] = true
			if b.Status.Limit == want.Limit && b.Status.Allocated == want.Allocated {
				continue
			}
			// The difference is part of the identity: a bucket that merely
			// moves between two readings is not reported.
			r.Add(Discrepancy{Check: CheckBucketMismatch,
				ID: fmt.Sprintf("%s/%s/%d/%d", CheckBucketMismatch, where, b.Status.Limit-want.Limit, b.Status.Allocated-want.Allocated),
				Problem: fmt.Sprintf("AllowanceBucket %s (%s) shows limit %d and allocated %d; the stored grants and claims give limit %d and allocated %d",
					where, describeBucket(id), b.Status.Limit, b.Status.Allocated, want.Limit, want.Allocated),
				Repair: repair})
		}
		r.Counts.StoredBuckets += len(list.Items)
		return nil
	})
	if err != nil {
		return err
	}
	ids := s.eng.BucketIDs()
	r.Counts.ExpectedBuckets = len(ids)
	reported := map[quota.ConsumerID]bool{}
	for _, id := range ids {
		if seen[id] || v.missingConsumer(s, r, id, reported) {
			continue
		}
		want, _ := s.eng.Bucket(id)
		where := nsName(placement.Namespace(id.Consumer), quota.BucketName(id))
		r.Add(Discrepancy{Check: CheckBucketMissing, ID: string(CheckBucketMissing) + "/" + where,
			Problem: fmt.Sprintf("AllowanceBucket %s (%s) is not stored; the stored grants and claims give limit %d and allocated %d", where, describeBucket(id), want.Limit, want.Allocated),
			Repair:  repair})
	}
	return nil
}

// checkGovernedObjects lists every object of every enforced policy's
// trigger kind and reports each one the policy governs that has no granted
// claim of that policy. An object is governed when it was created after the
// policy (an object of the policy's second is ambiguous and skipped) and
// the constraints are true for it as stored. Constraints that read user or
// requestInfo cannot be judged from a stored object: such objects are
// counted, not judged. A governed object whose grant is still in flight, or
// that was admitted fail-open, is accounted for.
func (v *verifier) checkGovernedObjects(ctx context.Context, s *reading, r *Report) error {
	byTrigger := map[schema.GroupVersionResource][]*enforcedPolicy{}
	for _, p := range s.policies {
		gv, err := schema.ParseGroupVersion(p.apiVersion)
		if err != nil {
			p.stats.Enforced, p.stats.NotEnforced = false, "invalid trigger apiVersion: "+err.Error()
			continue
		}
		gvr, err := kinds.ResourceFor(ctx, v.mapper, v.dynamic, schema.GroupKind{Group: gv.Group, Kind: p.compiled.Kind}, gv.Version)
		if err != nil || gvr.Empty() {
			r.Note("ClaimCreationPolicy %s: its trigger %s %s is not served, so no object of it exists", p.name, p.apiVersion, p.compiled.Kind)
			continue
		}
		byTrigger[gvr] = append(byTrigger[gvr], p)
	}
	exempt := governed.NewExemptions(v.o.SystemNamespace, v.o.ExemptNamespaces)
	for gvr, policies := range byTrigger {
		gr := gvr.GroupResource()
		eachIn := func(inPlane bool) func(obj map[string]any, m metav1.Object) {
			return func(obj map[string]any, m metav1.Object) {
				uid := string(m.GetUID())
				if _, wanted := s.objects[gr][uid]; wanted {
					s.objects[gr][uid] = true
				}
				for _, p := range policies {
					gk := schema.GroupKind{Group: gvr.Group, Kind: p.compiled.Kind}
					out, err := exempt.OutOfScope(p.compiled.NamespaceSelector, gk, m.GetNamespace(), m.GetName(), inPlane, func(ns string) (labels.Set, error) {
						if gk.Group == "" && gk.Kind == "Namespace" {
							return governed.NamespaceLabels(ns, m.GetLabels()), nil
						}
						return v.namespaceLabels(ctx, ns)
					})
					if exempt.Exempt(gk, m.GetNamespace(), m.GetName(), inPlane) || (err == nil && out) {
						p.stats.Objects++
						p.stats.Exempt++
						continue
					}
					v.judge(s, r, p, gvr, obj, m)
				}
			}
		}
		each := eachIn(false)
		if v.o.ControlPlane == "" || v.o.ControlPlane == "root" {
			if err := v.listObjects(ctx, gvr, true, each); err != nil {
				return err
			}
		}
		complete := v.o.ControlPlane == ""
		for _, name := range v.planesJudged(s) {
			if !planes.OwnStorage(gr) {
				break // a plane holds none of its own: the root's are judged
			}
			p, err := planes.Parse(name)
			if err != nil {
				return err
			}
			dyn, err := v.planes.Dynamic(p)
			if err != nil {
				return err
			}
			err = v.listObjectsWith(ctx, dyn, gvr, true, eachIn(true))
			switch {
			case apierrors.IsNotFound(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsForbidden(err):
				// Not served: its owner is not Ready, or being deleted.
				r.Note("control plane %s is not served now (%v): its objects were not judged", name, err)
				complete = false
			case err != nil:
				return err
			}
		}
		s.listed[gr] = complete
	}
	return nil
}

// planesJudged are the control planes whose objects are judged, sorted.
func (v *verifier) planesJudged(s *reading) []string {
	switch v.o.ControlPlane {
	case "root":
		return nil
	case "":
		names := make([]string, 0, len(s.planes))
		for n := range s.planes {
			names = append(names, n)
		}
		slices.Sort(names)
		return names
	}
	return []string{v.o.ControlPlane}
}

// judge checks one object against one policy.
func (v *verifier) judge(s *reading, r *Report, p *enforcedPolicy, gvr schema.GroupVersionResource, obj map[string]any, m metav1.Object) {
	st := p.stats
	st.Objects++
	created := m.GetCreationTimestamp().Unix()
	switch {
	case m.GetDeletionTimestamp() != nil:
		st.Deleting++
		return
	case created < p.created:
		st.BeforePolicy++
		return
	case created == p.created:
		st.Ambiguous++
		return
	case p.compiled.ConstraintsReadRequest():
		st.NotJudged++
		return
	}
	applies, err := p.compiled.Applies(policy.Input{Object: obj})
	switch {
	case err != nil:
		v.unevaluable(r, p, m, err)
		return
	case !applies:
		st.NotGoverned++
		return
	}
	st.Governed++
	uid := string(m.GetUID())
	var ungranted []string
	for _, c := range s.claimsByObject[uid] {
		if c.policy != p.name {
			continue
		}
		if c.granted {
			st.Claimed++
			return
		}
		ungranted = append(ungranted, c.key)
	}
	if slices.Contains(s.inFlight[uid], p.name) {
		st.InFlight++
		return
	}
	if f := s.failOpen[uid]; f != nil && (len(f.Policies) == 0 || slices.Contains(f.Policies, p.name)) {
		st.FailOpen++
		return
	}
	// As the existing-object charger evaluates it, with no requester: an
	// object it cannot evaluate was left uncharged and said so.
	in := policy.Input{Object: obj, User: map[string]any{"name": "", "uid": "", "groups": []string{}, "extra": map[string]any{}},
		RequestInfo: map[string]any{"verb": "create", "namespace": m.GetNamespace(), "name": m.GetName(), "apiGroup": gvr.Group,
			"apiVersion": gvr.Version, "resource": gvr.Resource, "subresource": "", "dryRun": false}}
	var ee *policy.EvalError
	charges, _, err := p.compiled.Evaluate(in)
	if errors.As(err, &ee) && !ee.Amount {
		// (An amount is judged with the registrations' units, which are
		// not read here: only an expression that fails is reported.)
		v.unevaluable(r, p, m, err)
		return
	}
	if err == nil && !charges {
		// Every request renders 0: admission charges nothing, and no claim
		// is missing.
		st.Governed--
		st.NotGoverned++
		return
	}
	st.Unclaimed++
	kind := p.compiled.Kind
	object := fmt.Sprintf("%s (uid %s)", kindName(kind, m.GetNamespace(), m.GetName()), uid)
	problem := fmt.Sprintf("%s is governed by ClaimCreationPolicy %s and has no granted claim", object, p.name)
	if len(ungranted) > 0 {
		problem += fmt.Sprintf(" (its claim %s is not granted)", strings.Join(ungranted, ", "))
	}
	if v.etcd == nil {
		problem += "; fail-open records were not read (no etcd given), so it may have been admitted fail-open"
	}
	repair := fmt.Sprintf("quotaplane verify --repair asks the engine to charge it (it sets the annotation %s on ClaimCreationPolicy %s, and the engine charges every governed object without a claim); or delete and re-create the %s through the API so that admission charges it",
		quotav1alpha1.AnnotationChargeExisting, p.name, kind)
	if ok, rendered, err := p.compiled.Evaluate(policy.Input{Object: obj}); err == nil && ok {
		ns := rendered.Namespace
		if ns == "" {
			ns = p.claimNamespace
		}
		if ns == "" {
			ns = m.GetNamespace()
		}
		if ns == "" {
			ns = v.o.SystemNamespace
		}
		requests := claimFrom("", "", "", time.Time{}, rendered.Spec).Requests
		repair += fmt.Sprintf("; or create the claim it makes — a ResourceClaim in namespace %s for %s requesting %s, with spec.resourceRef naming the %s, an ownerReference to it, and the annotations %s=%s, %s=%s, %s=%s",
			ns, convert.ConsumerID(rendered.Spec.ConsumerRef), describeRequests(requests), kind,
			quotav1alpha1.AnnotationPolicy, p.name, quotav1alpha1.AnnotationResource, quotav1alpha1.FormatResource(gvr), quotav1alpha1.AnnotationResourceUID, uid)
	}
	r.Add(Discrepancy{Check: CheckUnclaimedObject, ID: fmt.Sprintf("%s/%s/%s", CheckUnclaimedObject, uid, p.name), Problem: problem, Repair: repair,
		Target: &Target{Kind: "ClaimCreationPolicy", Name: p.name}})
}

// checkClaimedObjects looks up the object every claim names (by the UID of
// its resource-uid annotation) and reports each claim whose object is not
// stored: a granted one holds quota for nothing.
func (v *verifier) checkClaimedObjects(ctx context.Context, s *reading, r *Report) error {
	if err := v.findObjects(ctx, s); err != nil {
		return err
	}
	for objectUID, claims := range s.claimsByObject {
		for _, c := range claims {
			if s.stored(c.gr, objectUID) || !v.judges(c.plane) {
				continue
			}
			held := "it is not granted and holds nothing"
			if qc, ok := s.eng.Claim(c.uid); ok && c.granted {
				held = fmt.Sprintf("it holds %s of %s for nothing", describeRequests(qc.Requests), qc.Consumer)
			}
			where := "which is not stored"
			if _, served := v.servedVersion(ctx, c.gr); !served {
				where = fmt.Sprintf("whose kind (%s) this API server does not serve", c.gr)
			}
			ns, name, _ := strings.Cut(c.key, "/")
			r.Add(Discrepancy{Check: CheckOrphanClaim, ID: string(CheckOrphanClaim) + "/" + c.uid,
				Problem: fmt.Sprintf("ResourceClaim %s (uid %s) names %s (uid %s), %s; %s", c.key, c.uid, c.object, objectUID, where, held),
				Repair:  fmt.Sprintf("delete the claim: kubectl delete resourceclaim -n %s %s (quotaplane verify --repair does)", ns, name),
				Target:  &Target{Kind: "ResourceClaim", Namespace: ns, Name: name, UID: c.uid}})
		}
	}
	return nil
}

// findObjects lists, by metadata only, every resource with objects to look
// up that the governed-objects check did not list already.
func (v *verifier) findObjects(ctx context.Context, s *reading) error {
	planesOf := map[schema.GroupResource]map[string]bool{}
	for _, claims := range s.claimsByObject {
		for _, c := range claims {
			if planesOf[c.gr] == nil {
				planesOf[c.gr] = map[string]bool{}
			}
			planesOf[c.gr][c.plane] = true
		}
	}
	for gr, uids := range s.objects {
		if s.listed[gr] {
			continue
		}
		gvr, served := v.servedVersion(ctx, gr)
		if !served {
			continue // nothing of it can be stored
		}
		found := func(_ map[string]any, m metav1.Object) {
			if _, wanted := uids[string(m.GetUID())]; wanted {
				uids[string(m.GetUID())] = true
			}
		}
		for plane := range planesOf[gr] {
			if !v.judges(plane) || (plane != "" && !planes.OwnStorage(gr)) {
				continue
			}
			var err error
			if plane == "" {
				err = v.listObjects(ctx, gvr, false, found)
			} else {
				err = v.listPlane(ctx, plane, gvr, found)
			}
			if err != nil {
				return err
			}
		}
		s.listed[gr] = true
	}
	return nil
}

// judges reports whether the objects of plane ("" the root) are judged.
func (v *verifier) judges(plane string) bool {
	switch v.o.ControlPlane {
	case "":
		return true
	case "root":
		return plane == ""
	}
	return plane == v.o.ControlPlane
}

// listPlane lists every object of gvr in a control plane; a plane not
// served now (its owner not Ready, or being deleted) has none to list.
func (v *verifier) listPlane(ctx context.Context, plane string, gvr schema.GroupVersionResource, each func(obj map[string]any, m metav1.Object)) error {
	p, err := planes.Parse(plane)
	if err != nil {
		return err
	}
	dyn, err := v.planes.Dynamic(p)
	if err != nil {
		return err
	}
	err = v.listObjectsWith(ctx, dyn, gvr, true, each)
	if apierrors.IsNotFound(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsForbidden(err) {
		return nil
	}
	return err
}

// Deadlines of grants in flight.
const (
	// admissionDeadline is how long after admission a grant may be held
	// without its claim: the engine releases it 70 s after admission when
	// its object never got stored (maxRequestDuration in
	// internal/engine/materialize.go), and looks again every 5 s.
	admissionDeadline = 70 * time.Second
	// deadlineMargin covers the engine's recheck period, a change of
	// leader, and clocks that differ between verify and the server.
	deadlineMargin = 30 * time.Second
)

// checkInFlight reports grants held in flight past their deadline. A grant
// made at admission must have its claim written, or be released, within
// admissionDeadline plus a margin. A grant in the engine's ledger must be
// written to its claim within moments; having no time of its own, it is
// overdue when its claim is stored without Granted, and the recheck (a
// second reading later) separates overdue from in progress. A ledger entry
// whose claim is gone holds nothing: it is noted, not reported.
func (v *verifier) checkInFlight(s *reading, r *Report) {
	now := time.Now()
	repair := fmt.Sprintf(newTermRepair, v.o.SystemNamespace, v.o.SystemNamespace, formats.LeaseName)
	for _, g := range s.journal {
		if g.adopted || g.sinceAdmission(now) <= admissionDeadline+deadlineMargin {
			continue
		}
		object := "an object"
		if ref := g.Spec.ResourceRef; ref != nil {
			object = kindName(ref.Kind, ref.Namespace, ref.Name)
		}
		outcome := "the next term writes its claim, since the object is stored"
		gr, ok := v.resourceOf(g.Resource, g.Spec.ResourceRef)
		if !ok || !s.stored(gr, g.ObjectUID) {
			outcome = "the object is not stored, so the next term releases the grant"
		}
		r.Add(Discrepancy{Check: CheckInFlightOverdue, ID: string(CheckInFlightOverdue) + "/" + g.etcdKey,
			Problem: fmt.Sprintf("the grant made at admission for claim %s (%s, uid %s, ClaimCreationPolicy %s: %s of %s) has been held since %s, %s past its deadline of %s; its quota is held and its claim was never written",
				g.claimKey(), object, g.ObjectUID, g.Policy, describeRequests(claimFrom("", "", "", time.Time{}, g.Spec).Requests), convert.ConsumerID(g.Spec.ConsumerRef),
				g.Created.UTC().Format(time.RFC3339), (g.sinceAdmission(now) - admissionDeadline - deadlineMargin).Round(time.Second), admissionDeadline+deadlineMargin),
			Repair: repair + "; " + outcome})
	}
	unstored := 0
	for uid, key := range s.ledger {
		granted, stored := s.ledgerClaims[uid]
		switch {
		case !stored:
			unstored++ // its claim was deleted: it holds nothing
		case !granted:
			r.Add(Discrepancy{Check: CheckInFlightOverdue, ID: string(CheckInFlightOverdue) + "/ledger/" + uid,
				Problem: fmt.Sprintf("the engine's ledger holds a grant in flight for claim %s (uid %s), which is stored without Granted: the grant counts, but was never written to its claim", key, uid),
				Repair:  repair + "; the next term writes it"})
		}
	}
	if unstored > 0 {
		r.Note("the engine's ledger lists %d grants in flight whose claims are no longer stored; they hold no quota, and the engine drops them from its ledger", unstored)
	}
}

// listFailOpen lists the objects admitted fail-open, apart from the
// discrepancies.
func listFailOpen(s *reading, r *Report) {
	for _, f := range s.failOpen {
		r.FailOpen = append(r.FailOpen, *f)
	}
}

// unevaluable reports an object the policy cannot be evaluated for: it
// holds no claim (admission refuses such a create under an enforcing
// policy, so it was stored while the policy did not enforce), and only a
// person can repair it.
func (v *verifier) unevaluable(r *Report, p *enforcedPolicy, m metav1.Object, err error) {
	p.stats.Unevaluable++
	uid := string(m.GetUID())
	kind := p.compiled.Kind
	object := fmt.Sprintf("%s (uid %s)", kindName(kind, m.GetNamespace(), m.GetName()), uid)
	r.Add(Discrepancy{Check: CheckUnevaluableObject, ID: fmt.Sprintf("%s/%s/%s", CheckUnevaluableObject, uid, p.name),
		Problem: fmt.Sprintf("%s is matched by ClaimCreationPolicy %s, which cannot be evaluated for it (%v), so it holds no claim of it", object, p.name, err),
		Repair: fmt.Sprintf("give the %s what the policy reads (its next write is refused until it does, and is then charged), fix ClaimCreationPolicy %s, or delete the %s",
			kind, p.name, kind),
		Target: &Target{Kind: "ClaimCreationPolicy", Name: p.name}})
}
