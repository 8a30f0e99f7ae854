package admit

// The scale benchmarks of docs/scale.md: what one decider (one engine
// leader's cache, under its one lock) holds and decides with the state of
// many organizations, how long it takes to rebuild that state from stored
// objects, and the same decisions through several independent deciders.
// Sizes come from QUOTAPLANE_SCALE_ORGS (default 10000); without -bench
// nothing here runs.

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/cache"
	"github.com/quotaplane/quotaplane/internal/engine/fence"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/quota/accounting"
)

// The synthetic state, per organization: two Projects beneath it; three
// grants (the organization's and one per project); eight buckets; ten
// stored claims, granted and sealed. Every tenth organization has no vCPU
// left at its own level, so creates there are refused at the organization
// while their project has room.
const (
	scaleProjects     = 2  // projects per organization
	scaleInstances    = 4  // stored instance claims per project
	scaleFullEvery    = 10 // organizations i%scaleFullEvery == 0 are full
	scaleBatch        = 1024
	scaleProjectsType = "resourcemanager.miloapis.com/projects"
	scaleVCPU         = "compute.example.com/vcpu"
	scaleInstanceType = "compute.example.com/instances"
	scaleLocation     = "compute.example.com/location"
)

// scaleOrgSizes are the organization counts to run, from
// QUOTAPLANE_SCALE_ORGS (comma-separated), 10000 by default.
func scaleOrgSizes(b *testing.B) []int {
	v := os.Getenv("QUOTAPLANE_SCALE_ORGS")
	if v == "" {
		return []int{10000}
	}
	var out []int
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1000 {
			b.Fatalf("QUOTAPLANE_SCALE_ORGS=%q: want organization counts of at least 1000, comma-separated", v)
		}
		out = append(out, n)
	}
	return out
}

// scaleWorld renders the stored objects of the synthetic state.
type scaleWorld struct {
	orgs   int
	sealer *fence.Sealer
	t0     time.Time
}

func newScaleWorld(orgs int) scaleWorld {
	return scaleWorld{orgs: orgs, sealer: fence.NewSealer([]byte("scale-benchmark-sealing-key-0123456789")), t0: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func scaleOrg(i int) string { return fmt.Sprintf("org-%06d", i) }

func scaleProject(i, p int) string { return fmt.Sprintf("org-%06d-p%d", i, p) }

// scaleUID is a UID as long as the API server's.
func scaleUID(kind, i, seq int) types.UID {
	return types.UID(fmt.Sprintf("%08x-%04x-4000-8000-%012x", i, kind, seq))
}

func (w scaleWorld) registrations() []*quotav1alpha1.ResourceRegistration {
	org := quotav1alpha1.ConsumerTypeRef{APIGroup: quota.OrganizationGroup, Kind: "Organization"}
	project := quotav1alpha1.ConsumerTypeRef{APIGroup: quota.OrganizationGroup, Kind: "Project"}
	reg := func(name, rt string, consumer quotav1alpha1.ConsumerTypeRef, parents []quotav1alpha1.ConsumerTypeRef, claiming quotav1alpha1.ClaimingResource) *quotav1alpha1.ResourceRegistration {
		return &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("reg-" + name), CreationTimestamp: metav1.NewTime(w.t0)},
			Spec: quotav1alpha1.ResourceRegistrationSpec{ResourceType: quotav1alpha1.ResourceType(rt), BaseUnit: "unit", Type: quotav1alpha1.RegistrationTypeEntity,
				ConsumerType: consumer, ParentConsumerTypes: parents, ClaimingResources: []quotav1alpha1.ClaimingResource{claiming}}}
	}
	instance := quotav1alpha1.ClaimingResource{APIGroup: "compute.example.com", Kind: "Instance"}
	return []*quotav1alpha1.ResourceRegistration{
		reg("projects", scaleProjectsType, org, nil, quotav1alpha1.ClaimingResource{APIGroup: quota.OrganizationGroup, Kind: "Project"}),
		reg("vcpu", scaleVCPU, project, []quotav1alpha1.ConsumerTypeRef{org}, instance),
		reg("instances", scaleInstanceType, project, []quotav1alpha1.ConsumerTypeRef{org}, instance),
	}
}

func orgRefOf(i int) quotav1alpha1.ConsumerRef {
	return quotav1alpha1.ConsumerRef{APIGroup: quota.OrganizationGroup, Kind: "Organization", Name: scaleOrg(i)}
}

func projectRefOf(i, p int) quotav1alpha1.ConsumerRef {
	return quotav1alpha1.ConsumerRef{APIGroup: quota.OrganizationGroup, Kind: "Project", Name: scaleProject(i, p)}
}

// projects are organization i's projects, as the hierarchy watch reports
// them.
func (w scaleWorld) projects(i int) ([]quota.ConsumerID, quota.ConsumerInfo) {
	org := quota.ConsumerID{APIGroup: quota.OrganizationGroup, Kind: "Organization", Name: scaleOrg(i)}
	ids := make([]quota.ConsumerID, scaleProjects)
	for p := range ids {
		ids[p] = quota.ConsumerID{APIGroup: quota.OrganizationGroup, Kind: "Project", Name: scaleProject(i, p)}
	}
	return ids, quota.ConsumerInfo{Parent: &org}
}

// scaleUsedVCPU is the vCPU an organization's stored claims use.
const scaleUsedVCPU = scaleProjects * scaleInstances * 2

// orgVCPU is organization i's own vCPU limit: what its stored claims use
// when it is full, four times that otherwise.
func orgVCPU(i int) int64 {
	if i%scaleFullEvery == 0 {
		return scaleUsedVCPU
	}
	return 4 * scaleUsedVCPU
}

// grants are organization i's grants: its own (projects; vCPU; instances
// overall and in dfw) and one per project (vCPU; instances).
func (w scaleWorld) grants(i int) []*quotav1alpha1.ResourceGrant {
	ns := quota.OrganizationNamespace(scaleOrg(i))
	bucket := func(amount int64, dims ...quotav1alpha1.Dimension) quotav1alpha1.GrantBucket {
		return quotav1alpha1.GrantBucket{Amount: amount, Dimensions: dims}
	}
	out := []*quotav1alpha1.ResourceGrant{{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "organization", UID: scaleUID(1, i, 0), Generation: 1},
		Spec: quotav1alpha1.ResourceGrantSpec{ConsumerRef: orgRefOf(i), Allowances: []quotav1alpha1.Allowance{
			{ResourceType: scaleProjectsType, Buckets: []quotav1alpha1.GrantBucket{bucket(10)}},
			{ResourceType: scaleVCPU, Buckets: []quotav1alpha1.GrantBucket{bucket(orgVCPU(i))}},
			{ResourceType: scaleInstanceType, Buckets: []quotav1alpha1.GrantBucket{bucket(32), bucket(16, quotav1alpha1.Dimension{Key: scaleLocation, Value: "dfw"})}},
		}},
	}}
	for p := range scaleProjects {
		out = append(out, &quotav1alpha1.ResourceGrant{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: scaleProject(i, p), UID: scaleUID(1, i, 1+p), Generation: 1},
			Spec: quotav1alpha1.ResourceGrantSpec{ConsumerRef: projectRefOf(i, p), Allowances: []quotav1alpha1.Allowance{
				{ResourceType: scaleVCPU, Buckets: []quotav1alpha1.GrantBucket{bucket(32)}},
				{ResourceType: scaleInstanceType, Buckets: []quotav1alpha1.GrantBucket{bucket(16)}},
			}},
		})
	}
	return out
}

// scaleBucketsPerOrg counts the buckets an organization's grants make.
const scaleBucketsPerOrg = 4 + 2*scaleProjects

// instance is the claim a policy renders for Instance n of project p of
// organization i: 2 vCPU and one instance, in dfw or iad.
func (w scaleWorld) instance(i, p, n int, name string) *quotav1alpha1.ResourceClaim {
	loc := "iad"
	if n%2 == 0 {
		loc = "dfw"
	}
	obj := fmt.Sprintf("inst-%d-%d", p, n)
	return &quotav1alpha1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: quota.OrganizationNamespace(scaleOrg(i)), Name: name,
			Annotations: map[string]string{quotav1alpha1.AnnotationPolicy: "instances", quotav1alpha1.AnnotationResourceUID: string(scaleUID(3, i, n))}},
		Spec: quotav1alpha1.ResourceClaimSpec{ConsumerRef: projectRefOf(i, p),
			Requests: []quotav1alpha1.ResourceRequest{
				{ResourceType: scaleVCPU, Amount: 2},
				{ResourceType: scaleInstanceType, Amount: 1, Dimensions: []quotav1alpha1.Dimension{{Key: scaleLocation, Value: loc}}},
			},
			ResourceRef: &quotav1alpha1.ResourceRef{APIGroup: "compute.example.com", Kind: "Instance", Name: obj, Namespace: scaleProject(i, p)}},
	}
}

// claims are organization i's stored claims, granted and sealed: one per
// project (charged to the organization) and scaleInstances per project.
func (w scaleWorld) claims(i int) []*quotav1alpha1.ResourceClaim {
	var out []*quotav1alpha1.ResourceClaim
	seq := 0
	add := func(c *quotav1alpha1.ResourceClaim) {
		c.UID = scaleUID(2, i, seq)
		c.CreationTimestamp = metav1.NewTime(w.t0.Add(time.Duration(i*16+seq) * time.Millisecond))
		c.Status.Conditions = []metav1.Condition{{Type: quotav1alpha1.ClaimConditionGranted, Status: metav1.ConditionTrue, Reason: quotav1alpha1.ClaimReasonQuotaAvailable}}
		c.Status.DecisionSeal = w.sealer.Seal(c)
		out = append(out, c)
		seq++
	}
	for p := range scaleProjects {
		add(&quotav1alpha1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: quota.OrganizationNamespace(scaleOrg(i)), Name: "project-" + scaleProject(i, p),
				Annotations: map[string]string{quotav1alpha1.AnnotationPolicy: "projects", quotav1alpha1.AnnotationResourceUID: string(scaleUID(4, i, p))}},
			Spec: quotav1alpha1.ResourceClaimSpec{ConsumerRef: orgRefOf(i),
				Requests:    []quotav1alpha1.ResourceRequest{{ResourceType: scaleProjectsType, Amount: 1}},
				ResourceRef: &quotav1alpha1.ResourceRef{APIGroup: quota.OrganizationGroup, Kind: "Project", Name: scaleProject(i, p)}},
		})
		for n := range scaleInstances {
			add(w.instance(i, p, n, fmt.Sprintf("inst-%d-%d-instances", p, n)))
		}
	}
	return out
}

// scaleClaimsPerOrg counts claims(i).
const scaleClaimsPerOrg = scaleProjects * (1 + scaleInstances)

// newScaleCache is an empty cache with the registrations, as a new term has
// once its registration informer has synced.
func (w scaleWorld) newScaleCache() *cache.Cache {
	c := cache.New(nil, w.sealer.Trusted)
	for _, r := range w.registrations() {
		c.RegistrationChanged(r)
	}
	return c
}

// addOrgs feeds the cache the hierarchy and grants of the organizations
// mine selects, as the term's informers do.
func (w scaleWorld) addOrgs(c *cache.Cache, mine func(int) bool) {
	for i := range w.orgs {
		if !mine(i) {
			continue
		}
		ids, info := w.projects(i)
		for _, id := range ids {
			c.SetConsumer(id, info)
		}
		for _, g := range w.grants(i) {
			c.GrantChanged(g)
		}
	}
}

// addClaims feeds the cache the stored claims of those organizations.
func (w scaleWorld) addClaims(c *cache.Cache, mine func(int) bool) {
	for i := range w.orgs {
		if !mine(i) {
			continue
		}
		for _, cl := range w.claims(i) {
			if c.ClaimAdded(cl) {
				panic("a sealed stored claim asked to be written again")
			}
		}
	}
}

// settleRebuild ends the rebuild as a term does: ready, then the first decision
// round (nothing waits) that takes the buckets to write.
func settleRebuild(b *testing.B, c *cache.Cache) {
	c.MarkReady()
	if d := c.Decide(false); len(d.Changed) != 0 {
		b.Fatalf("the first round after the rebuild changed %d claims; want none", len(d.Changed))
	}
}

// quickly runs setup with the collector held back until the heap reaches
// 8 GiB: the state is built sooner, and nothing built under it is timed.
func quickly(setup func()) {
	gc, limit := debug.SetGCPercent(-1), debug.SetMemoryLimit(8<<30)
	defer func() {
		debug.SetGCPercent(gc)
		debug.SetMemoryLimit(limit)
	}()
	setup()
}

func heapAfterGC() uint64 {
	var m runtime.MemStats
	runtime.GC() // returns once the heap is swept
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// scaleState is one decider's state, its memory and the creates it is
// asked to decide.
type scaleState struct {
	term           *Term
	bytesPerBucket float64
	bytesPerClaim  float64
	totalMiB       float64
	creates        [][]*quotav1alpha1.ResourceClaim
	// refused[k]: creates[k] is in a full organization.
	refused []bool
}

func everyOrg(int) bool { return true }

// buildScale builds the whole state in one cache, measuring the heap after
// the grants and after the claims. Objects are rendered one organization at
// a time and dropped: the delta is what the decider keeps, not the
// informers' copies.
func buildScale(b *testing.B, w scaleWorld) *scaleState {
	m0 := heapAfterGC()
	c := w.newScaleCache()
	quickly(func() {
		w.addOrgs(c, everyOrg)
		c.Decide(false) // take the changed buckets, as the decide loop does
	})
	m1 := heapAfterGC()
	quickly(func() {
		w.addClaims(c, everyOrg)
		settleRebuild(b, c)
	})
	m2 := heapAfterGC()
	c.SetClaimLookup(func(string) bool { return false })
	st := &scaleState{term: &Term{Cache: c},
		bytesPerBucket: float64(m1-m0) / float64(w.orgs*scaleBucketsPerOrg),
		bytesPerClaim:  float64(m2-m1) / float64(w.orgs*scaleClaimsPerOrg),
		totalMiB:       float64(m2-m0) / (1 << 20),
	}
	quickly(func() { st.creates, st.refused = w.creates(everyOrg) })
	return st
}

// creates are creates spread uniformly over the organizations mine
// selects: each organization once in a random order (the same each run),
// repeated with new names when there are fewer than scaleBatch. Within
// scaleBatch creates no project gets more than its room.
func (w scaleWorld) creates(mine func(int) bool) ([][]*quotav1alpha1.ResourceClaim, []bool) {
	rng := rand.New(rand.NewPCG(1, 2))
	perm := rng.Perm(w.orgs)
	var out [][]*quotav1alpha1.ResourceClaim
	var refused []bool
	for rep := 0; rep == 0 || len(out) < scaleBatch; rep++ {
		for k, i := range perm {
			if !mine(i) {
				continue
			}
			n := 1000 + rep*w.orgs + k
			out = append(out, []*quotav1alpha1.ResourceClaim{w.instance(i, (k+rep)%scaleProjects, n, fmt.Sprintf("new-%d-instances", n))})
			refused = append(refused, i%scaleFullEvery == 0)
		}
	}
	return out, refused
}

// decideScale is admission's work under the lock for one create
// (Term.admit without the journal write): the lock with room, the names
// checked, the claims decided together and held as pending.
func (t *Term) decideScale(ctx context.Context, create []*quotav1alpha1.ResourceClaim) ([]*formats.PendingClaim, bool) {
	if err := t.lockWithRoom(ctx); err != nil {
		panic(err)
	}
	entries, res, err := t.decideCreateLocked(create, metav1.Now())
	t.Cache.Unlock()
	if err != nil {
		panic(err)
	}
	return entries, res.Granted
}

// releaseScale gives back what pending entries hold, as the settler does for a
// create that was never stored.
func (t *Term) releaseScale(entries []*formats.PendingClaim) {
	t.Cache.Lock()
	for _, p := range entries {
		t.Cache.ForgetPendingLocked(p)
	}
	t.Cache.Unlock()
}

// checkScale fails unless no bucket is allocated beyond its limit and the
// allocations are those of the stored claims alone (every admitted create
// was given back).
func checkScale(b *testing.B, c *cache.Cache, orgs int) {
	var over, allocated int64
	c.Read(func(acc *accounting.Accounts) {
		for _, id := range acc.BucketIDs() {
			st, _ := acc.Bucket(id)
			if st.Allocated > st.Limit {
				over++
			}
			if id.ResourceType == scaleVCPU && id.Consumer.Kind == "Organization" {
				allocated += st.Allocated
			}
		}
	})
	if want := int64(orgs) * scaleUsedVCPU; over != 0 || allocated != want {
		b.Fatalf("%d buckets over their limit; organizations' vCPU allocated %d, want %d", over, allocated, want)
	}
}

// BenchmarkScaleDecide is admission's decision for one create under the
// cache's lock, with the synthetic state of N organizations; creates spread
// uniformly over them, a tenth refused at the organization's level. One op
// is one decision; every scaleBatch decisions, the grants are given back
// and the changed buckets taken with the timer stopped (the release is
// reported as ns/release). Also reported: the decider's heap per bucket and
// per claim, and the process's CPU time per decision (cpu-ns/op), which a
// busy machine changes less than the wall clock.
func BenchmarkScaleDecide(b *testing.B) {
	for _, orgs := range scaleOrgSizes(b) {
		st := buildScale(b, newScaleWorld(orgs))
		runtime.GC()
		b.Run(fmt.Sprintf("orgs=%d", orgs), func(b *testing.B) {
			ctx := context.Background()
			t := st.term
			held := make([]*formats.PendingClaim, 0, scaleBatch)
			granted, want := 0, 0
			var release time.Duration
			var cpu timedCPU
			b.ReportAllocs()
			b.ResetTimer()
			cpu.start(b)
			for i := 0; i < b.N; i++ {
				k := i % len(st.creates)
				entries, ok := t.decideScale(ctx, st.creates[k])
				if ok {
					granted++
					held = append(held, entries...)
				}
				if !st.refused[k] {
					want++
				}
				if (i+1)%scaleBatch == 0 || i+1 == b.N || k+1 == len(st.creates) {
					cpu.stop(b)
					b.StopTimer()
					began := time.Now()
					t.releaseScale(held)
					release += time.Since(began)
					held = held[:0]
					// The decide loop's rounds take the changed buckets
					// (BenchmarkScaleChange measures them); decisions mark
					// them again.
					t.Cache.Lock()
					t.Cache.AccountsLocked().TakeChanged()
					t.Cache.Unlock()
					b.StartTimer()
					cpu.start(b)
				}
			}
			b.StopTimer()
			if granted != want {
				b.Fatalf("granted %d creates, want %d", granted, want)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
			cpu.report(b)
			b.ReportMetric(float64(release.Nanoseconds())/float64(max(granted, 1)), "ns/release")
			b.ReportMetric(st.bytesPerClaim, "B/claim")
			b.ReportMetric(st.bytesPerBucket, "B/bucket")
			b.ReportMetric(st.totalMiB, "MiB")
		})
		checkScale(b, st.term.Cache, orgs)
		st = nil
	}
}

// BenchmarkScaleChange measures work under the lock whose cost follows the
// number of consumers rather than the change: the decide loop's round with
// nothing to decide (it counts the waiting claims for a metric); the
// release of a project's claim followed by that round (room gained at a
// level shared by several consumers is offered to every consumer); and a
// new project followed by one create's decision (the claims' levels are
// refreshed, consumer by consumer, after any consumer changed).
func BenchmarkScaleChange(b *testing.B) {
	for _, orgs := range scaleOrgSizes(b) {
		st := buildScale(b, newScaleWorld(orgs))
		runtime.GC()
		ctx := context.Background()
		t := st.term
		next := 0 // the next create
		decideBatch := func(held []*formats.PendingClaim) []*formats.PendingClaim {
			for len(held) < scaleBatch {
				entries, _ := t.decideScale(ctx, st.creates[next])
				held = append(held, entries...)
				if next = (next + 1) % len(st.creates); next == 0 {
					break // a create is decided again only once given back
				}
			}
			return held
		}
		b.Run(fmt.Sprintf("orgs=%d/round", orgs), func(b *testing.B) {
			var cpu timedCPU
			b.ReportAllocs()
			b.ResetTimer()
			cpu.start(b)
			for i := 0; i < b.N; i++ {
				if d := t.Cache.Decide(false); len(d.Changed) != 0 {
					b.Fatalf("a round with nothing to decide changed %d claims", len(d.Changed))
				}
			}
			cpu.stop(b)
			cpu.report(b)
		})
		b.Run(fmt.Sprintf("orgs=%d/release+round", orgs), func(b *testing.B) {
			var held []*formats.PendingClaim
			var cpu timedCPU
			b.ReportAllocs()
			b.ResetTimer()
			cpu.start(b)
			for i := 0; i < b.N; i++ {
				if len(held) == 0 {
					cpu.stop(b)
					b.StopTimer()
					held = decideBatch(held)
					b.StartTimer()
					cpu.start(b)
				}
				p := held[len(held)-1]
				held = held[:len(held)-1]
				t.releaseScale([]*formats.PendingClaim{p})
				t.Cache.Decide(false)
			}
			cpu.stop(b)
			b.StopTimer()
			t.releaseScale(held)
			cpu.report(b)
		})
		projects := 0
		b.Run(fmt.Sprintf("orgs=%d/project+decision", orgs), func(b *testing.B) {
			var held []*formats.PendingClaim
			var cpu timedCPU
			b.ReportAllocs()
			b.ResetTimer()
			cpu.start(b)
			for i := 0; i < b.N; i++ {
				org := (projects * 7919) % orgs
				parent := quota.ConsumerID{APIGroup: quota.OrganizationGroup, Kind: "Organization", Name: scaleOrg(org)}
				t.Cache.SetConsumer(quota.ConsumerID{APIGroup: quota.OrganizationGroup, Kind: "Project", Name: fmt.Sprintf("%s-new%d", scaleOrg(org), projects)},
					quota.ConsumerInfo{Parent: &parent})
				projects++
				entries, _ := t.decideScale(ctx, st.creates[next])
				held = append(held, entries...)
				if next = (next + 1) % len(st.creates); next == 0 || len(held) == scaleBatch {
					cpu.stop(b)
					b.StopTimer()
					t.releaseScale(held)
					held = held[:0]
					b.StartTimer()
					cpu.start(b)
				}
			}
			cpu.stop(b)
			b.StopTimer()
			t.releaseScale(held)
			cpu.report(b)
		})
		checkScale(b, t.Cache, orgs)
	}
}

// scaleStored are the stored objects, as the term's informers list them.
type scaleStored struct {
	projects []quota.ConsumerID   // scaleProjects per organization
	parents  []quota.ConsumerInfo // one per organization
	grants   []*quotav1alpha1.ResourceGrant
	claims   []*quotav1alpha1.ResourceClaim // scaleClaimsPerOrg per organization
}

func (w scaleWorld) stored() scaleStored {
	var st scaleStored
	for i := range w.orgs {
		ids, info := w.projects(i)
		st.projects = append(st.projects, ids...)
		st.parents = append(st.parents, info)
		st.grants = append(st.grants, w.grants(i)...)
		st.claims = append(st.claims, w.claims(i)...)
	}
	return st
}

// rebuildOrder is an order the stored objects may reach a new term in.
type rebuildOrder string

const (
	// hierarchyFirst: the projects, then the grant and claim informers'
	// first lists, each added at once (Cache.GrantsAdded, ClaimsAdded), as a
	// term does.
	hierarchyFirst rebuildOrder = "hierarchy-first"
	// claimsFirst: the claims' first list at once, then the grants', then
	// the projects (the hierarchy watch's lists arriving last).
	claimsFirst rebuildOrder = "claims-first"
	// perOrganization: organization by organization, its projects, grants
	// and claims one at a time (Cache.ClaimAdded, as events arrive).
	perOrganization rebuildOrder = "per-organization"
)

// rebuild feeds a new cache what the informers list, in order, then
// settles it (ready, the first round).
func (st scaleStored) rebuild(b *testing.B, w scaleWorld, order rebuildOrder) *cache.Cache {
	defer cache.HoldCollector()() // as a term does: held only under GOMEMLIMIT
	c := w.newScaleCache()
	const grantsPerOrg = 1 + scaleProjects
	projects := func(i int) {
		for _, id := range st.projects[i*scaleProjects : (i+1)*scaleProjects] {
			c.SetConsumer(id, st.parents[i])
		}
	}
	switch order {
	case hierarchyFirst:
		for i := range w.orgs {
			projects(i)
		}
		c.GrantsAdded(st.grants)
		c.ClaimsAdded(st.claims)
	case claimsFirst:
		c.ClaimsAdded(st.claims)
		c.GrantsAdded(st.grants)
		for i := range w.orgs {
			projects(i)
		}
	case perOrganization:
		for i := range w.orgs {
			projects(i)
			for _, g := range st.grants[i*grantsPerOrg : (i+1)*grantsPerOrg] {
				c.GrantChanged(g)
			}
			for _, cl := range st.claims[i*scaleClaimsPerOrg : (i+1)*scaleClaimsPerOrg] {
				c.ClaimAdded(cl)
			}
		}
	}
	settleRebuild(b, c)
	return c
}

// BenchmarkScaleRebuild rebuilds the whole state from the stored objects,
// as a new term does once its informers have listed them: registrations,
// then the hierarchy and grants, then every claim at once (their seals
// checked, then restored as granted), then ready and the first decision
// round. The objects are rendered beforehand, outside the timer. One op is
// one rebuild; run it with -benchtime 1x. With QUOTAPLANE_SCALE_INTERLEAVED=1
// it also rebuilds in the other orders a term may see (claims first,
// organization by organization).
func BenchmarkScaleRebuild(b *testing.B) {
	orders := []rebuildOrder{hierarchyFirst}
	if os.Getenv("QUOTAPLANE_SCALE_INTERLEAVED") == "1" {
		orders = append(orders, claimsFirst, perOrganization)
	}
	for _, orgs := range scaleOrgSizes(b) {
		w := newScaleWorld(orgs)
		var st scaleStored
		quickly(func() { st = w.stored() })
		for _, order := range orders {
			name := fmt.Sprintf("orgs=%d", orgs)
			if order != hierarchyFirst {
				name += "/order=" + string(order)
			}
			b.Run(name, func(b *testing.B) {
				for n := 0; n < b.N; n++ {
					b.StopTimer()
					runtime.GC()
					b.StartTimer()
					c := st.rebuild(b, w, order)
					b.StopTimer()
					checkScale(b, c, orgs)
					b.StartTimer()
				}
				b.ReportMetric(float64(len(st.claims)), "claims")
				b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/rebuild")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(st.claims)), "ns/claim")
			})
		}
	}
}

// shardOf is the shard of an organization: a hash of its name.
func shardOf(org string, shards int) int {
	h := fnv.New32a()
	h.Write([]byte(org))
	return int(h.Sum32() % uint32(shards))
}

// BenchmarkScaleShards decides the same creates through S independent
// deciders, each a cache owning the organizations whose name hashes to it,
// driven by W goroutines: workers=S is one goroutine per decider; fewer
// workers take turns over the deciders (workers=1: the effect of smaller
// state alone); shards=1/workers=2 is two goroutines sharing one decider and its
// lock (the one-decider design under concurrent admission). One op is one
// decision and, every scaleBatch, the release of what was granted, both
// timed; decisions/s is over the wall time of all goroutines, cpu-ns/op the
// process's CPU time per decision.
func BenchmarkScaleShards(b *testing.B) {
	for _, orgs := range scaleOrgSizes(b) {
		w := newScaleWorld(orgs)
		for _, shape := range []struct {
			shards  int
			workers []int
		}{{1, []int{1, 2}}, {2, []int{1, 2}}, {4, []int{1, 2, 4}}} {
			// One level per decider count, so that -bench can build one alone.
			b.Run(fmt.Sprintf("orgs=%d/shards=%d", orgs, shape.shards), func(b *testing.B) {
				terms := make([]*Term, shape.shards)
				owned := make([]int, shape.shards)
				creates := make([][][]*quotav1alpha1.ResourceClaim, shape.shards)
				refused := make([][]bool, shape.shards)
				for s := range terms {
					mine := func(i int) bool { return shardOf(scaleOrg(i), shape.shards) == s }
					owned[s] = countOrgs(orgs, mine)
					c := w.newScaleCache()
					quickly(func() {
						w.addOrgs(c, mine)
						w.addClaims(c, mine)
						settleRebuild(b, c)
						creates[s], refused[s] = w.creates(mine)
					})
					c.SetClaimLookup(func(string) bool { return false })
					terms[s] = &Term{Cache: c}
				}
				runtime.GC()
				for _, workers := range shape.workers {
					b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
						runShards(b, terms, creates, refused, workers)
					})
				}
				for s, t := range terms {
					checkScale(b, t.Cache, owned[s])
				}
			})
		}
	}
}

// shardOp is one create of one decider's.
type shardOp struct{ shard, create int }

// shardWork is what each of workers goroutines decides, in order. With
// fewer workers than deciders, a worker takes turns over its deciders,
// scaleBatch creates at a time (as a core would serve one decider for a
// while, keeping its state in cache); with more, the workers of one decider
// share its creates.
func shardWork(creates [][][]*quotav1alpha1.ResourceClaim, workers int) [][]shardOp {
	shards := len(creates)
	work := make([][]shardOp, workers)
	for g := range workers {
		if workers > shards {
			s := g % shards
			for k := g / shards; k < len(creates[s]); k += workers / shards {
				work[g] = append(work[g], shardOp{s, k})
			}
			continue
		}
		for from, more := 0, true; more; from += scaleBatch {
			more = false
			for s := g; s < shards; s += workers {
				for k := from; k < min(from+scaleBatch, len(creates[s])); k++ {
					work[g] = append(work[g], shardOp{s, k})
					more = true
				}
			}
		}
	}
	return work
}

// runShards decides b.N creates with workers goroutines over the deciders
// terms, giving back what each worker was granted every scaleBatch creates.
func runShards(b *testing.B, terms []*Term, creates [][][]*quotav1alpha1.ResourceClaim, refused [][]bool, workers int) {
	ctx := context.Background()
	work := shardWork(creates, workers)
	granted, want := make([]int, workers), make([]int, workers)
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu := processCPU(b)
	for g := range workers {
		n := b.N / workers
		if g < b.N%workers {
			n++
		}
		wg.Go(func() {
			held := make([][]*formats.PendingClaim, len(terms))
			for i := range n {
				op := work[g][i%len(work[g])]
				if entries, ok := terms[op.shard].decideScale(ctx, creates[op.shard][op.create]); ok {
					granted[g]++
					held[op.shard] = append(held[op.shard], entries...)
				}
				if !refused[op.shard][op.create] {
					want[g]++
				}
				if (i+1)%scaleBatch == 0 || i+1 == n || (i+1)%len(work[g]) == 0 {
					for s, h := range held {
						terms[s].releaseScale(h)
						held[s] = h[:0]
					}
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	cpu = processCPU(b) - cpu
	for g := range granted {
		if granted[g] != want[g] {
			b.Fatalf("worker %d granted %d creates, want %d", g, granted[g], want[g])
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(runtime.GOMAXPROCS(0)), "gomaxprocs")
}

// processCPU is the CPU time the process has used so far: on a machine
// shared with other work, CPU per decision shows what the wall clock
// cannot (whether deciders in parallel cost more each).
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// timedCPU adds up the process's CPU time while a benchmark's timer runs.
type timedCPU struct{ total, since time.Duration }

func (c *timedCPU) start(b *testing.B) { c.since = processCPU(b) }

func (c *timedCPU) stop(b *testing.B) { c.total += processCPU(b) - c.since }

func (c *timedCPU) report(b *testing.B) {
	b.ReportMetric(float64(c.total.Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// countOrgs counts the organizations mine selects.
func countOrgs(orgs int, mine func(int) bool) int {
	n := 0
	for i := range orgs {
		if mine(i) {
			n++
		}
	}
	return n
}
