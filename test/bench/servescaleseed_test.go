package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/engine/fence"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/server/etcd"
	"github.com/quotaplane/quotaplane/internal/server/pki"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// The organizations of docs/scale.md as a real serve stores them. One
// organization is made through the API of the serve under test (its
// Organization, two Projects, three grants, ten claims granted and sealed
// by the engine, and everything serve's controllers make for them: the
// namespace, its RBAC, the eight buckets); its keys, read back from etcd,
// are the templates every other organization is cloned from, straight into
// the stored bytes. Every substitution keeps its length (names, UIDs,
// seals, bucket names), so protobuf and JSON values stay valid as stored.

// seedToken names the template organization; organization i is
// seedOrg(i), of the same length.
const seedToken = "sorg-000000"

func seedOrg(i int) string { return fmt.Sprintf("sorg-%06d", i) }

var uidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// seedTemplate is what cloning needs from the template organization.
type seedTemplate struct {
	prefix string
	// before are the keys stored before the organization was made, and
	// the UIDs their values hold (the registrations', the system's).
	before     map[string]bool
	beforeUIDs map[string]bool
	sealer     *fence.Sealer
	claims     []quotav1alpha1.ResourceClaim
	buckets    []quotav1alpha1.AllowanceBucket
}

// scaleRegistrations are docs/scale.md's three registrations.
func scaleRegistrations() []*quotav1alpha1.ResourceRegistration {
	org := quotav1alpha1.ConsumerTypeRef{APIGroup: quota.OrganizationGroup, Kind: "Organization"}
	project := quotav1alpha1.ConsumerTypeRef{APIGroup: quota.OrganizationGroup, Kind: "Project"}
	instance := quotav1alpha1.ClaimingResource{APIGroup: "compute.example.com", Kind: "Instance"}
	reg := func(name, rt string, consumer quotav1alpha1.ConsumerTypeRef, parents []quotav1alpha1.ConsumerTypeRef, claiming quotav1alpha1.ClaimingResource) *quotav1alpha1.ResourceRegistration {
		return &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: quotav1alpha1.ResourceRegistrationSpec{ResourceType: quotav1alpha1.ResourceType(rt), BaseUnit: "unit", Type: quotav1alpha1.RegistrationTypeEntity,
				ConsumerType: consumer, ParentConsumerTypes: parents, ClaimingResources: []quotav1alpha1.ClaimingResource{claiming}}}
	}
	return []*quotav1alpha1.ResourceRegistration{
		reg("projects", "resourcemanager.miloapis.com/projects", org, nil, quotav1alpha1.ClaimingResource{APIGroup: quota.OrganizationGroup, Kind: "Project"}),
		reg("vcpu", "compute.example.com/vcpu", project, []quotav1alpha1.ConsumerTypeRef{org}, instance),
		reg("instances", "compute.example.com/instances", project, []quotav1alpha1.ConsumerTypeRef{org}, instance),
	}
}

// scaleOrgObjects are the template organization's grants and claims, the
// shape of internal/engine/admit's scaleWorld (a non-full organization).
func scaleOrgObjects(org string) ([]*quotav1alpha1.ResourceGrant, []*quotav1alpha1.ResourceClaim) {
	ns := quota.OrganizationNamespace(org)
	orgRef := quotav1alpha1.ConsumerRef{APIGroup: quota.OrganizationGroup, Kind: "Organization", Name: org}
	projectRef := func(p int) quotav1alpha1.ConsumerRef {
		return quotav1alpha1.ConsumerRef{APIGroup: quota.OrganizationGroup, Kind: "Project", Name: fmt.Sprintf("%s-p%d", org, p)}
	}
	bucket := func(amount int64, dims ...quotav1alpha1.Dimension) quotav1alpha1.GrantBucket {
		return quotav1alpha1.GrantBucket{Amount: amount, Dimensions: dims}
	}
	grants := []*quotav1alpha1.ResourceGrant{{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "organization"},
		Spec: quotav1alpha1.ResourceGrantSpec{ConsumerRef: orgRef, Allowances: []quotav1alpha1.Allowance{
			{ResourceType: "resourcemanager.miloapis.com/projects", Buckets: []quotav1alpha1.GrantBucket{bucket(10)}},
			{ResourceType: "compute.example.com/vcpu", Buckets: []quotav1alpha1.GrantBucket{bucket(64)}},
			{ResourceType: "compute.example.com/instances", Buckets: []quotav1alpha1.GrantBucket{bucket(32), bucket(16, quotav1alpha1.Dimension{Key: "compute.example.com/location", Value: "dfw"})}},
		}}}}
	var claims []*quotav1alpha1.ResourceClaim
	for p := range 2 {
		grants = append(grants, &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: projectRef(p).Name},
			Spec: quotav1alpha1.ResourceGrantSpec{ConsumerRef: projectRef(p), Allowances: []quotav1alpha1.Allowance{
				{ResourceType: "compute.example.com/vcpu", Buckets: []quotav1alpha1.GrantBucket{bucket(32)}},
				{ResourceType: "compute.example.com/instances", Buckets: []quotav1alpha1.GrantBucket{bucket(16)}},
			}}})
		claims = append(claims, &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "project-" + projectRef(p).Name},
			Spec: quotav1alpha1.ResourceClaimSpec{ConsumerRef: orgRef,
				Requests:    []quotav1alpha1.ResourceRequest{{ResourceType: "resourcemanager.miloapis.com/projects", Amount: 1}},
				ResourceRef: &quotav1alpha1.ResourceRef{APIGroup: quota.OrganizationGroup, Kind: "Project", Name: projectRef(p).Name}}})
		for n := range 4 {
			claims = append(claims, scaleInstanceClaim(org, p, n, fmt.Sprintf("inst-%d-%d-instances", p, n)))
		}
	}
	return grants, claims
}

// scaleInstanceClaim is the claim of Instance n of project p: 2 vCPU and
// one instance, in dfw or iad.
func scaleInstanceClaim(org string, p, n int, name string) *quotav1alpha1.ResourceClaim {
	loc := "iad"
	if n%2 == 0 {
		loc = "dfw"
	}
	project := fmt.Sprintf("%s-p%d", org, p)
	return &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: quota.OrganizationNamespace(org), Name: name},
		Spec: quotav1alpha1.ResourceClaimSpec{ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: quota.OrganizationGroup, Kind: "Project", Name: project},
			Requests: []quotav1alpha1.ResourceRequest{
				{ResourceType: "compute.example.com/vcpu", Amount: 2},
				{ResourceType: "compute.example.com/instances", Amount: 1, Dimensions: []quotav1alpha1.Dimension{{Key: "compute.example.com/location", Value: loc}}},
			},
			ResourceRef: &quotav1alpha1.ResourceRef{APIGroup: "compute.example.com", Kind: "Instance", Name: fmt.Sprintf("inst-%d-%d", p, n), Namespace: project}}}
}

// etcdClient connects to etcd as serve does, from what it recorded in
// dataDir.
func etcdClient(b *testing.B, servers []string, ca, cert, key string) *clientv3.Client {
	tlsConfig, err := transport.TLSInfo{CertFile: cert, KeyFile: key, TrustedCAFile: ca}.ClientConfig()
	if err != nil {
		b.Fatal(err)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: servers, TLS: tlsConfig, DialTimeout: 10 * time.Second, Logger: zap.NewNop(),
		MaxCallRecvMsgSize: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// makeTemplate makes the template organization through the API of the
// running serve s, and records what cloning it needs.
func makeTemplate(b *testing.B, s *serveProcess) *seedTemplate {
	ctx := context.Background()
	c := quotatest.NewClient(b, s.config)
	f := &quotatest.Fixture{T: b, C: c}
	for _, r := range scaleRegistrations() {
		if err := c.Create(ctx, r); err != nil {
			b.Fatal(err)
		}
		f.WaitCondition(r, quotav1alpha1.RegistrationConditionActive, metav1.ConditionTrue)
	}
	loc, err := formats.ReadEtcdFile(s.dataDir)
	if err != nil {
		b.Fatal(err)
	}
	t := &seedTemplate{prefix: loc.Prefix, before: map[string]bool{}, beforeUIDs: map[string]bool{}}
	ec := etcdClient(b, loc.Servers, loc.CAFile, loc.CertFile, loc.KeyFile)
	resp, err := ec.Get(ctx, loc.Prefix+"/", clientv3.WithPrefix())
	_ = ec.Close()
	if err != nil {
		b.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		t.before[string(kv.Key)] = true
		for _, u := range uidPattern.FindAll(kv.Value, -1) {
			t.beforeUIDs[string(u)] = true
		}
	}

	quotatest.Organization(b, c, seedToken)
	for p := range 2 {
		quotatest.Project(b, c, fmt.Sprintf("%s-p%d", seedToken, p), seedToken)
	}
	grants, claims := scaleOrgObjects(seedToken)
	for _, g := range grants {
		if err := c.Create(ctx, g); err != nil {
			b.Fatal(err)
		}
		f.WaitCondition(g, quotav1alpha1.GrantConditionActive, metav1.ConditionTrue)
	}
	for _, cl := range claims {
		if err := c.Create(ctx, cl); err != nil {
			b.Fatal(err)
		}
	}
	ns := quota.OrganizationNamespace(seedToken)
	// Every claim granted and sealed, the eight buckets written with what
	// they hold, and nothing changing for 3 s.
	var last string
	stable := 0
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var cl quotav1alpha1.ResourceClaimList
		var bl quotav1alpha1.AllowanceBucketList
		if c.List(ctx, &cl, client.InNamespace(ns)) != nil || c.List(ctx, &bl, client.InNamespace(ns)) != nil {
			return false, nil
		}
		granted := 0
		for _, x := range cl.Items {
			if d := quotav1alpha1.ClaimDecision(x.Status.Conditions); d != nil && d.Status == metav1.ConditionTrue && x.Status.DecisionSeal != "" {
				granted++
			}
		}
		state := fmt.Sprintf("%d/%d", granted, len(bl.Items))
		for _, x := range cl.Items {
			state += " " + x.ResourceVersion
		}
		for _, x := range bl.Items {
			state += " " + x.ResourceVersion
		}
		if granted != len(claims) || len(bl.Items) != 8 || state != last {
			last, stable = state, 0
			return false, nil
		}
		stable++
		if stable < 6 {
			return false, nil
		}
		t.claims, t.buckets = cl.Items, bl.Items
		return true, nil
	})
	if err != nil {
		b.Fatalf("the template organization's claims were not all granted and its 8 buckets written: %s (granted/buckets)", last)
	}
	for _, bk := range t.buckets {
		if got := quota.BucketName(bucketID(bk.Spec.ConsumerRef, string(bk.Spec.ResourceType), bk.Spec.Dimensions)); got != bk.Name {
			b.Fatalf("bucket %s is not named %s by its spec: its clones cannot be named", bk.Name, got)
		}
	}
	secret, err := s.kube.CoreV1().Secrets(engine.DefaultOptions().SystemNamespace).Get(ctx, fence.SealSecretName, metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	t.sealer = fence.NewSealer(secret.Data["key"])
	for i := range t.claims {
		if !t.sealer.Trusted(&t.claims[i]) {
			b.Fatalf("claim %s: its seal is not the key's", t.claims[i].Name)
		}
	}
	return t
}

func bucketID(ref quotav1alpha1.ConsumerRef, rt string, dims []quotav1alpha1.Dimension) quota.BucketID {
	var d []quota.Dim
	for _, p := range dims {
		d = append(d, quota.Dim{Key: p.Key, Value: p.Value})
	}
	return quota.BucketID{Consumer: quota.ConsumerID{APIGroup: ref.APIGroup, Kind: ref.Kind, Name: ref.Name, Namespace: ref.Namespace},
		ResourceType: rt, Dims: quota.NewDimensions(d...).Key()}
}

// seedResult is what seed stored.
type seedResult struct {
	templateKeys int
	kinds        map[string]int
	objects      int64 // keys under the prefix once seeded
	took         time.Duration
}

// seedWorkers and seedTxnOps bound the writes: each worker commits
// transactions of at most seedTxnOps puts (etcd's --max-txn-ops is 128).
const (
	seedWorkers = 4
	seedTxnOps  = 128
)

// seed starts dataDir's etcd alone (serve stopped) and writes orgs-1
// clones of the template organization into it.
func seed(b *testing.B, dataDir string, t *seedTemplate, orgs int) seedResult {
	ctx := context.Background()
	began := time.Now()
	files, err := pki.EnsureEtcd(filepath.Join(dataDir, "pki", "etcd"))
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := etcd.Options{Dir: filepath.Join(dataDir, "etcd"), UnsafeNoFsync: true,
		ClientTLS: &etcd.ClientTLS{CertFile: files.ServerCert, KeyFile: files.ServerKey, ClientCAFile: files.CACert}}.Complete()
	if err != nil {
		b.Fatal(err)
	}
	server, err := cfg.Start(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer server.Stop()
	ec := etcdClient(b, []string{server.ClientURL()}, files.CACert, files.ClientCert, files.ClientKey)
	defer ec.Close()
	resp, err := ec.Get(ctx, t.prefix+"/", clientv3.WithPrefix())
	if err != nil {
		b.Fatal(err)
	}
	type kv struct{ key, value string }
	var tmpl []kv
	res := seedResult{kinds: map[string]int{}}
	uids := map[string]bool{}
	for _, x := range resp.Kvs {
		k := string(x.Key)
		if t.before[k] || !strings.Contains(k, seedToken) || strings.Contains(k, "/events/") {
			continue
		}
		tmpl = append(tmpl, kv{k, string(x.Value)})
		rest := strings.TrimPrefix(k, t.prefix+"/")
		res.kinds[rest[:strings.LastIndex(rest, "/")]]++
		for _, u := range uidPattern.FindAllString(string(x.Value), -1) {
			if !t.beforeUIDs[u] {
				uids[u] = true
			}
		}
	}
	res.templateKeys = len(tmpl)
	b.Logf("template organization: %d keys, %d UIDs: %v", len(tmpl), len(uids), res.kinds)

	// replacer is organization i's substitutions, every one of the same
	// length as what it replaces.
	replacer := func(i int) *strings.Replacer {
		name := seedOrg(i)
		pairs := []string{seedToken, name}
		for u := range uids {
			pairs = append(pairs, u, u[:24]+fmt.Sprintf("%012x", i))
		}
		for _, c := range t.claims {
			clone := c.DeepCopy()
			clone.UID = types.UID(string(c.UID)[:24] + fmt.Sprintf("%012x", i))
			clone.Spec.ConsumerRef.Name = strings.ReplaceAll(c.Spec.ConsumerRef.Name, seedToken, name)
			pairs = append(pairs, c.Status.DecisionSeal, t.sealer.Seal(clone))
		}
		for _, bk := range t.buckets {
			ref := bk.Spec.ConsumerRef
			ref.Name = strings.ReplaceAll(ref.Name, seedToken, name)
			pairs = append(pairs, bk.Name, quota.BucketName(bucketID(ref, string(bk.Spec.ResourceType), bk.Spec.Dimensions)))
		}
		for k := 0; k < len(pairs); k += 2 {
			if len(pairs[k]) != len(pairs[k+1]) {
				b.Fatalf("%q would become %q, of another length", pairs[k], pairs[k+1])
			}
		}
		return strings.NewReplacer(pairs...)
	}

	work := make(chan int, 64)
	errs := make(chan error, seedWorkers)
	var wg sync.WaitGroup
	for range seedWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ops []clientv3.Op
			flush := func() error {
				if len(ops) == 0 {
					return nil
				}
				cctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				_, err := ec.Txn(cctx).Then(ops...).Commit()
				ops = ops[:0]
				return err
			}
			for i := range work {
				r := replacer(i)
				if len(ops)+len(tmpl) > seedTxnOps {
					if err := flush(); err != nil {
						errs <- err
						return
					}
				}
				for _, x := range tmpl {
					ops = append(ops, clientv3.OpPut(r.Replace(x.key), r.Replace(x.value)))
				}
			}
			errs <- flush()
		}()
	}
	for i := 1; i < orgs; i++ {
		select {
		case work <- i:
		case err := <-errs:
			b.Fatalf("seeding: %v", err)
		}
		if i%10000 == 0 {
			b.Logf("seeded %d organizations in %s", i, time.Since(began).Round(time.Second))
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatalf("seeding: %v", err)
		}
	}
	count, err := ec.Get(ctx, t.prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		b.Fatal(err)
	}
	res.objects = count.Count
	res.took = time.Since(began)
	return res
}
