package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/policy"
	"github.com/quotaplane/quotaplane/internal/policy/governed"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/quota/accounting"
)

// reading is one reading of the whole plane: the engine's state rebuilt from
// storage, and compact indexes of what the checks need. It keeps no object.
type reading struct {
	eng *accounting.Accounts

	// policies are the enforced ClaimCreationPolicies.
	policies []*enforcedPolicy
	// generations are every policy's generation, by name.
	generations map[string]int64

	// ledger are the engine's in-flight grants: claim UID → namespace/name;
	// ledgerClaims says, of those stored, whether each is granted.
	ledger       map[string]string
	ledgerClaims map[string]bool

	// journal are admission's grants whose claims are not written, by the
	// claim's namespace/name.
	journal map[string]*journalGrant
	// inFlight are the policies with a grant in the journal, by object UID.
	inFlight map[string][]string
	// failOpen are the fail-open records, by object UID.
	failOpen map[string]*FailOpen

	// claimsByObject are the claims that name an object, by its UID.
	claimsByObject map[string][]*objectClaim
	// objects are the objects to look up, by resource and UID: whether
	// each was found stored.
	objects map[schema.GroupResource]map[string]bool
	// listed are the resources already listed whole.
	listed map[schema.GroupResource]bool
	// projectOrgs are the Projects' organizations, where their buckets live.
	projectOrgs map[string]string
	// consumers are the Organizations and Projects stored, by kind and name
	// (no entry for a kind that is not served).
	consumers map[string]map[string]bool
	// grantsOf are the grants naming each consumer, as namespace/name.
	grantsOf map[quota.ConsumerID][]string
	// planes are the control planes whose objects are judged: every
	// Organization's and Project's, and those claims name.
	planes map[string]bool
}

func newReading() *reading {
	return &reading{
		eng:            accounting.New(),
		generations:    map[string]int64{},
		ledger:         map[string]string{},
		ledgerClaims:   map[string]bool{},
		journal:        map[string]*journalGrant{},
		inFlight:       map[string][]string{},
		failOpen:       map[string]*FailOpen{},
		claimsByObject: map[string][]*objectClaim{},
		objects:        map[schema.GroupResource]map[string]bool{},
		listed:         map[schema.GroupResource]bool{},
		projectOrgs:    map[string]string{},
		consumers:      map[string]map[string]bool{},
		grantsOf:       map[quota.ConsumerID][]string{},
		planes:         map[string]bool{},
	}
}

// lookUp asks for an object to be looked up by UID.
func (s *reading) lookUp(gr schema.GroupResource, uid string) {
	if s.objects[gr] == nil {
		s.objects[gr] = map[string]bool{}
	}
	if _, ok := s.objects[gr][uid]; !ok {
		s.objects[gr][uid] = false
	}
}

// stored reports whether an object looked up was found.
func (s *reading) stored(gr schema.GroupResource, uid string) bool { return s.objects[gr][uid] }

// enforcedPolicy is a Ready, enabled ClaimCreationPolicy, compiled.
type enforcedPolicy struct {
	name     string
	created  int64 // creation time, in seconds
	compiled *policy.Compiled
	// apiVersion of the trigger, and the claim namespace the template fixes.
	apiVersion, claimNamespace string
	stats                      *PolicyStats
}

// journalGrant is what verify reads of a grant made at admission, decoded
// from the engine's own record (formats.PendingClaim).
type journalGrant struct {
	Namespace string
	Name      string
	Policy    string
	Resource  string
	ObjectUID string
	Spec      quotav1alpha1.ResourceClaimSpec
	Created   metav1.Time
	// An update's change: only Growth is held besides the claims it
	// replaces; a release holds nothing.
	Update  bool
	Release bool
	Growth  []quotav1alpha1.ResourceRequest

	etcdKey string
	// adopted: its claim is stored too (written between two of our reads)
	// and is counted as the claim.
	adopted bool
}

// decodeJournalGrant reads the journal entry at etcd key key.
func decodeJournalGrant(key string, value []byte) (*journalGrant, error) {
	var p formats.PendingClaim
	if err := json.Unmarshal(value, &p); err != nil {
		return nil, err
	}
	return &journalGrant{Namespace: p.Namespace, Name: p.Name, Policy: p.Policy, Resource: p.Resource, ObjectUID: p.ObjectUID,
		Spec: p.Spec, Created: p.Created, Update: p.Update, Release: p.Release, Growth: p.Growth, etcdKey: key}, nil
}

func (g *journalGrant) claimKey() string {
	if g.Release {
		return nsName(g.Namespace, g.Name) + "#release"
	}
	return nsName(g.Namespace, g.Name)
}

// objectClaim is what the checks keep of a claim that names an object.
type objectClaim struct {
	key, uid, policy string
	granted          bool
	// object is "Kind namespace/name" from spec.resourceRef.
	object string
	gr     schema.GroupResource
	// plane is the control plane the object is in, "" the root.
	plane string
}

// exemptGroups are never charged at admission (internal/admission/claimpolicy):
// the quota API itself, and CRDs.
var exemptGroups = map[string]bool{quotav1alpha1.GroupName: true, "apiextensions.k8s.io": true}

// readPolicies keeps the enforced policies, compiled, and every policy's
// generation.
func (v *verifier) readPolicies(ctx context.Context, s *reading, r *Report) error {
	return listQuota(ctx, v, func() *quotav1alpha1.ClaimCreationPolicyList { return &quotav1alpha1.ClaimCreationPolicyList{} }, func(list *quotav1alpha1.ClaimCreationPolicyList) error {
		for i := range list.Items {
			cp := &list.Items[i]
			s.generations[cp.Name] = cp.Generation
			stats := &PolicyStats{Name: cp.Name, Trigger: cp.Spec.Trigger.Resource.APIVersion + " " + cp.Spec.Trigger.Resource.Kind}
			r.Policies = append(r.Policies, stats)
			cp, note, why := policy.Enforcing(cp)
			if cp == nil {
				stats.NotEnforced = why
				continue
			}
			if note != "" {
				stats.Trigger = cp.Spec.Trigger.Resource.APIVersion + " " + cp.Spec.Trigger.Resource.Kind + " (" + note + ")"
			}
			compiled, err := policy.Compile(cp, policy.Options{})
			switch {
			case err != nil:
				stats.NotEnforced = "does not compile: " + err.Error()
			case exemptGroups[compiled.Group]:
				stats.NotEnforced = "admission never charges the " + compiled.Group + " group"
			default:
				stats.Enforced = true
				ns := cp.Spec.Target.ResourceClaimTemplate.Metadata.Namespace
				if strings.Contains(ns, "{{") {
					ns = ""
				}
				// Objects older than the policy are governed too once the
				// engine charged the existing objects of this generation.
				created := cp.CreationTimestamp.Unix()
				if x := cp.Status.ExistingObjects; x != nil && x.Generation == cp.Generation {
					created = 0
				}
				s.policies = append(s.policies, &enforcedPolicy{name: cp.Name, created: created, compiled: compiled,
					apiVersion: cp.Spec.Trigger.Resource.APIVersion, claimNamespace: ns, stats: stats})
			}
		}
		return nil
	})
}

// readLedger reads the engine's in-flight grants from its ledger.
func (v *verifier) readLedger(ctx context.Context, s *reading) error {
	cm, err := v.kube.CoreV1().ConfigMaps(v.o.SystemNamespace).Get(ctx, formats.LedgerName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil // no engine has led yet
	}
	if err != nil {
		return fmt.Errorf("reading the ledger %s/%s: %w", v.o.SystemNamespace, formats.LedgerName, err)
	}
	_, state, err := formats.DecodeLedger(cm)
	if err != nil {
		return err
	}
	s.ledger = state.Inflight
	return nil
}

// readJournal reads admission's grants in flight and the fail-open records
// from etcd. An unreadable grant is a discrepancy: the next engine leader
// cannot read the journal either.
func (v *verifier) readJournal(ctx context.Context, s *reading, r *Report) error {
	if v.etcd == nil {
		return nil
	}
	err := v.rangePrefix(ctx, formats.AdmissionGrantsPrefix(v.o.EtcdPrefix), func(key string, value []byte) {
		g, err := decodeJournalGrant(key, value)
		if err != nil {
			r.Add(Discrepancy{Check: CheckJournalUnreadable, ID: string(CheckJournalUnreadable) + "/" + key,
				Problem: fmt.Sprintf("the grant made at admission at etcd key %s cannot be decoded (%v): the next engine leader cannot read the journal and will not start deciding", key, err),
				Repair:  fmt.Sprintf("delete the key (etcdctl del %s) with no engine replica running, then check the bucket of its consumer", key)})
			return
		}
		s.journal[g.claimKey()] = g
		s.inFlight[g.ObjectUID] = append(s.inFlight[g.ObjectUID], g.Policy)
	})
	if err != nil {
		return err
	}
	return v.rangePrefix(ctx, formats.FailOpenPrefix(v.o.EtcdPrefix), func(key string, value []byte) {
		f := &FailOpen{Key: key}
		if err := json.Unmarshal(value, &f.FailOpenRecord); err != nil {
			f.Unreadable = err.Error()
		}
		uid := f.UID
		if uid == "" {
			uid = strings.TrimPrefix(key, formats.FailOpenPrefix(v.o.EtcdPrefix))
		}
		s.failOpen[uid] = f
	})
}

// readQuota feeds the engine every registration, grant and claim, as a new
// leader does (internal/engine term.go): a claim stored Granted, or listed
// in flight in the ledger, is restored as granted; every other claim waits
// and holds nothing. Admission's grants count once: as their key, or as
// their claim once it is written.
func (v *verifier) readQuota(ctx context.Context, s *reading, r *Report) error {
	err := listQuota(ctx, v, func() *quotav1alpha1.ResourceRegistrationList { return &quotav1alpha1.ResourceRegistrationList{} }, func(list *quotav1alpha1.ResourceRegistrationList) error {
		for i := range list.Items {
			s.eng.UpsertRegistration(convert.Registration(&list.Items[i]))
		}
		r.Counts.Registrations += len(list.Items)
		return nil
	})
	if err != nil {
		return err
	}
	err = listQuota(ctx, v, func() *quotav1alpha1.ResourceGrantList { return &quotav1alpha1.ResourceGrantList{} }, func(list *quotav1alpha1.ResourceGrantList) error {
		for i := range list.Items {
			g := convert.Grant(&list.Items[i])
			s.eng.UpsertGrant(g)
			s.grantsOf[g.Consumer] = append(s.grantsOf[g.Consumer], nsName(list.Items[i].Namespace, list.Items[i].Name))
		}
		r.Counts.Grants += len(list.Items)
		return nil
	})
	if err != nil {
		return err
	}
	err = listQuota(ctx, v, func() *quotav1alpha1.ResourceClaimList { return &quotav1alpha1.ResourceClaimList{} }, func(list *quotav1alpha1.ResourceClaimList) error {
		for i := range list.Items {
			v.claim(s, r, &list.Items[i])
		}
		r.Counts.Claims += len(list.Items)
		return nil
	})
	if err != nil {
		return err
	}
	for _, g := range s.journal {
		switch {
		case g.adopted:
		case g.Update:
			if len(g.Growth) > 0 {
				spec := g.Spec
				spec.Requests = g.Growth
				s.eng.RestoreGranted(claimFrom("update:"+g.claimKey(), g.Namespace, g.Name, g.Created.Time, spec))
			}
		default:
			s.eng.RestoreGranted(claimFrom("admission:"+g.claimKey(), g.Namespace, g.Name, g.Created.Time, g.Spec))
		}
		if gr, ok := v.resourceOf(g.Resource, g.Spec.ResourceRef); ok {
			s.lookUp(gr, g.ObjectUID)
		}
	}
	r.Counts.JournalGrants, r.Counts.LedgerGrants = len(s.journal), len(s.ledger)
	return nil
}

// claim feeds one stored claim to the engine and indexes it by the object
// it names.
func (v *verifier) claim(s *reading, r *Report, c *quotav1alpha1.ResourceClaim) {
	uid := string(c.UID)
	qc := claimFrom(uid, c.Namespace, c.Name, c.CreationTimestamp.Time, c.Spec)
	granted := convert.IsGranted(c)
	_, inflight := s.ledger[uid]
	if inflight {
		s.ledgerClaims[uid] = granted
	}
	if granted || inflight {
		s.eng.RestoreGranted(qc)
	} else {
		s.eng.AddClaim(qc)
	}

	objectUID := c.Annotations[quotav1alpha1.AnnotationResourceUID]
	if objectUID == "" || c.Labels[quotav1alpha1.LabelCluster] != "" {
		return // a member cluster's object: verify --member-kubeconfig
	}
	admittedAs := c.Annotations[quotav1alpha1.AnnotationGrantKey]
	if admittedAs == "" {
		admittedAs = nsName(c.Namespace, c.Name)
	}
	if g := s.journal[admittedAs]; g != nil && g.ObjectUID == objectUID && granted {
		g.adopted = true
	}
	r.Counts.AdmissionClaims++
	pol := c.Annotations[quotav1alpha1.AnnotationPolicy]
	if gen, err := strconv.ParseInt(c.Annotations[quotav1alpha1.AnnotationPolicyGeneration], 10, 64); err != nil {
		r.Counts.UnknownGeneration++
	} else if current, ok := s.generations[pol]; ok && gen < current {
		r.Counts.EarlierGeneration++
	}
	oc := &objectClaim{key: nsName(c.Namespace, c.Name), uid: uid, policy: pol, granted: granted, object: "an object"}
	if ref := c.Spec.ResourceRef; ref != nil {
		oc.object = kindName(ref.Kind, ref.Namespace, ref.Name)
	}
	oc.gr, _ = v.resourceOf(c.Annotations[quotav1alpha1.AnnotationResource], c.Spec.ResourceRef)
	if pl := c.Annotations[planes.Annotation]; pl != "" {
		s.planes[pl] = true
		oc.plane = pl
		oc.object += " in control plane " + pl
		planeConsumer(r, c, oc.object, pl)
	}
	s.claimsByObject[objectUID] = append(s.claimsByObject[objectUID], oc)
	s.lookUp(oc.gr, objectUID)
}

// resourceOf is the resource of the object a claim names: from its
// resource.version.group annotation, else from spec.resourceRef's kind.
func (v *verifier) resourceOf(annotation string, ref *quotav1alpha1.ResourceRef) (schema.GroupResource, bool) {
	if gvr, ok := quotav1alpha1.ParseResource(annotation); ok {
		return gvr.GroupResource(), true
	}
	if ref == nil {
		return schema.GroupResource{}, false
	}
	m, err := v.mapper.RESTMapping(schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind})
	if err != nil {
		return schema.GroupResource{}, false
	}
	return m.Resource.GroupResource(), true
}

// sinceAdmission is how long ago a grant was made at admission.
func (g *journalGrant) sinceAdmission(now time.Time) time.Duration { return now.Sub(g.Created.Time) }

// projects are the Projects, whose buckets are in their organization's
// namespace.
var projects = rmv1alpha1.SchemeGroupVersion.WithResource("projects")

// readProjects reads each Project's organization from its metadata; a
// server that does not serve Projects has none.
func (v *verifier) readProjects(ctx context.Context, s *reading) error {
	list, err := v.metadata.Resource(projects).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing Projects: %w", err)
	}
	// The engine's hierarchy (its default: Project → Organization): each
	// project's organization and labels, each organization's labels.
	s.consumers["Project"] = map[string]bool{}
	for i := range list.Items {
		m := &list.Items[i]
		s.consumers["Project"][m.Name] = true
		info := quota.ConsumerInfo{Labels: m.GetLabels()}
		s.planes[planes.Plane{Kind: planes.Projects, Name: m.Name}.String()] = true
		if org := rmv1alpha1.OrganizationOfProject(m); org != "" {
			s.projectOrgs[m.Name] = org
			info.Parent = &quota.ConsumerID{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: org}
		}
		s.eng.SetConsumer(quota.ConsumerID{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: m.Name}, info)
	}
	orgs, err := v.metadata.Resource(rmv1alpha1.SchemeGroupVersion.WithResource("organizations")).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("listing Organizations: %w", err)
	}
	s.consumers["Organization"] = map[string]bool{}
	for i := range orgs.Items {
		s.consumers["Organization"][orgs.Items[i].Name] = true
		s.planes[planes.Plane{Kind: planes.Organizations, Name: orgs.Items[i].Name}.String()] = true
		s.eng.SetConsumer(quota.ConsumerID{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: orgs.Items[i].Name}, quota.ConsumerInfo{Labels: orgs.Items[i].GetLabels()})
	}
	return nil
}

// planeConsumer reports a claim of an object stored in plane that charges
// the root's consumer of a kind each plane stores for itself (a Namespace):
// admission refuses such a charge now; one made before it did stays until
// its object goes (docs/kinds.md, "Consumers across planes").
func planeConsumer(r *Report, c *quotav1alpha1.ResourceClaim, object, plane string) {
	p, err := planes.Parse(plane)
	if err != nil {
		return
	}
	if err := governed.PlaneConsumer(p, c.Spec.ConsumerRef); err != nil {
		r.Add(Discrepancy{Check: CheckPlaneConsumer, ID: string(CheckPlaneConsumer) + "/" + string(c.UID),
			Problem: fmt.Sprintf("ResourceClaim %s (uid %s), for %s, charges %s: %v", nsName(c.Namespace, c.Name), c.UID, object, convert.ConsumerID(c.Spec.ConsumerRef), err),
			Repair:  "delete the object in its control plane (its claim goes with it), or leave it: nothing new is charged this way; then charge the plane's owner instead (docs/kinds.md, \"Consumers across planes\")"})
	}
}
