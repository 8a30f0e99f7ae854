package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/pkg/client/clientset/versioned"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestEveryReplicaAdmits: three serve replicas on one etcd, governed creates
// spread round-robin over all three. Every replica admits — the two whose
// engine does not lead ask the one that does — and exactly the limit is
// stored, each object with its granted claim, under a Fail and an Ignore
// policy alike (a follower never admits fail-open for want of the leader).
func TestEveryReplicaAdmits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs several processes")
	}
	const limit = 30
	bin := buildBinary(t)
	etcdURL := quotatest.StartEtcd(t)
	var replicas []*replica
	for _, name := range []string{"a", "b", "c"} {
		replicas = append(replicas, startReplica(t, bin, name, etcdURL))
	}
	ctx := t.Context()
	var clients []client.Client
	for _, r := range replicas {
		r.Config.QPS, r.Config.Burst = 500, 1000
		clients = append(clients, quotatest.NewClient(t, r.Config))
	}
	for _, failurePolicy := range []quotav1alpha1.FailurePolicy{quotav1alpha1.FailurePolicyIgnore, quotav1alpha1.FailurePolicyFail} {
		t.Run(string(failurePolicy), func(t *testing.T) {
			f := quotatest.NewFixture(t, quotatest.NewClient(t, replicas[0].Config))
			p := f.SecretsPolicy(limit)
			if failurePolicy == quotav1alpha1.FailurePolicyIgnore {
				p.Spec.FailurePolicy = failurePolicy
				if err := f.C.Update(ctx, p); err != nil {
					t.Fatal(err)
				}
				f.WaitCondition(p, quotav1alpha1.PolicyConditionReady, metav1.ConditionTrue)
			}
			for i := range replicas {
				start := time.Now()
				g := *f
				g.C = clients[i]
				g.WaitPolicyInForce(corev1.SchemeGroupVersion.WithResource("secrets"), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "in-force-probe", Namespace: f.NS}}, p.Name, p.Generation)
				// A new policy reaches each replica's admission through its
				// own watch (tens of milliseconds here): a create a replica
				// admits before is charged later as an existing object,
				// over the limit if need be (docs/replicas.md).
				t.Logf("replica %s enforces the policy after %s", replicas[i].Name, time.Since(start))
			}
			var byReplica [3]atomic.Int64
			var admittedBy sync.Map
			var wg sync.WaitGroup
			next := make(chan int, 3*limit)
			for i := range 3 * limit {
				next <- i
			}
			close(next)
			for w := range 6 {
				wg.Go(func() {
					for i := range next {
						r := (w + i) % 3
						s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%d", i), Namespace: f.NS}}
						err := clients[r].Create(ctx, s)
						switch {
						case err == nil:
							byReplica[r].Add(1)
							admittedBy.Store(s.Name, replicas[r].Name)
						case apierrors.IsForbidden(err):
						default:
							t.Errorf("create %d through replica %s: %v", i, replicas[r].Name, err)
						}
					}
				})
			}
			wg.Wait()
			var total int64
			for i := range byReplica {
				n := byReplica[i].Load()
				total += n
				t.Logf("replica %s admitted %d", replicas[i].Name, n)
				if n == 0 {
					t.Errorf("replica %s admitted nothing: it did not get decisions from the leader", replicas[i].Name)
				}
			}
			if total != limit {
				t.Errorf("%d creates admitted for a limit of %d", total, limit)
				for _, r := range replicas {
					for _, line := range strings.Split(r.Stderr.String(), "\n") {
						if strings.Contains(line, "fail-open") {
							t.Logf("replica %s: %s", r.Name, line)
						}
					}
				}
			}
			// Each stored Secret has its granted claim.
			err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
				secrets := &corev1.SecretList{}
				claims := &quotav1alpha1.ResourceClaimList{}
				if f.C.List(ctx, secrets, client.InNamespace(f.NS)) != nil || f.C.List(ctx, claims, client.InNamespace(f.NS)) != nil {
					return false, nil
				}
				granted := map[string]bool{}
				for _, cl := range claims.Items {
					if meta.IsStatusConditionTrue(cl.Status.Conditions, quotav1alpha1.ClaimConditionGranted) {
						granted[cl.Annotations[quotav1alpha1.AnnotationResourceUID]] = true
					}
				}
				for _, s := range secrets.Items {
					if !granted[string(s.UID)] {
						return false, nil
					}
				}
				return len(secrets.Items) == limit, nil
			})
			if err != nil {
				secrets := &corev1.SecretList{}
				claims := &quotav1alpha1.ResourceClaimList{}
				_ = f.C.List(ctx, secrets, client.InNamespace(f.NS))
				_ = f.C.List(ctx, claims, client.InNamespace(f.NS))
				for _, s := range secrets.Items {
					by, _ := admittedBy.Load(s.Name)
					var st []string
					for _, cl := range claims.Items {
						if cl.Annotations[quotav1alpha1.AnnotationResourceUID] == string(s.UID) {
							for _, c := range cl.Status.Conditions {
								st = append(st, cl.Name+":"+c.Type+"="+string(c.Status)+"/"+c.Reason+" "+c.Message)
							}
						}
					}
					t.Logf("secret %s by %v created %s claims %v", s.Name, by, s.CreationTimestamp, st)
				}
				for _, r := range replicas {
					for _, line := range strings.Split(r.Stderr.String(), "\n") {
						if strings.Contains(line, f.NS) || strings.Contains(line, f.ID) || strings.Contains(line, "xisting") || strings.Contains(line, "olic") {
							t.Logf("replica %s: %.300s", r.Name, line)
						}
					}
				}
				for _, r := range replicas {
					_ = os.WriteFile("/tmp/replica-"+r.Name+".log", []byte(r.Stderr.String()), 0o644)
				}
				buckets := &quotav1alpha1.AllowanceBucketList{}
				_ = f.C.List(ctx, buckets, client.InNamespace(f.BucketNS))
				for _, b := range buckets.Items {
					t.Logf("bucket %s: %+v", b.Name, b.Status)
				}
				t.Fatalf("the stored Secrets never settled at exactly %d, each charged", limit)
			}
			f.WaitBucket(quotatest.N(limit, limit, 0), "secrets")
		})
	}
	// Updates that grow what an object is charged are decided on every
	// replica too: six ConfigMaps of 1 unit each resized to 4, each through
	// another replica, against a limit of 20: exactly four fit.
	t.Run("updates", func(t *testing.T) {
		f := quotatest.NewFixture(t, quotatest.NewClient(t, replicas[0].Config))
		f.RegisterClaimedBy([]string{"units"}, quotav1alpha1.ClaimingResource{Kind: "ConfigMap"})
		f.Grant("g", map[string][]quotatest.Bucket{"units": {{Amount: 20}}})
		p := f.Policy("units", "v1", "ConfigMap", "units", intstr.FromString("{{ int(trigger.data.units) }}"))
		f.WaitCondition(p, quotav1alpha1.PolicyConditionReady, metav1.ConditionTrue)
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "in-force-probe", Namespace: f.NS}, Data: map[string]string{"units": "1"}}
		for i := range replicas {
			g := *f
			g.C = clients[i]
			g.WaitPolicyInForce(corev1.SchemeGroupVersion.WithResource("configmaps"), probe, p.Name, p.Generation)
		}
		for i := range 6 {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Namespace: f.NS}, Data: map[string]string{"units": "1"}}
			if err := clients[i%3].Create(ctx, cm); err != nil {
				t.Fatalf("creating ConfigMap %d through replica %s: %v", i, replicas[i%3].Name, err)
			}
		}
		f.WaitBucket(quotatest.N(20, 6, 14), "units")
		var resized, refused atomic.Int64
		var wg sync.WaitGroup
		for i := range 6 {
			wg.Go(func() {
				c := clients[(i+1)%3]
				cm := &corev1.ConfigMap{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: f.NS, Name: fmt.Sprintf("cm-%d", i)}, cm); err != nil {
					t.Errorf("reading ConfigMap %d: %v", i, err)
					return
				}
				cm.Data["units"] = "4"
				switch err := c.Update(ctx, cm); {
				case err == nil:
					resized.Add(1)
				case apierrors.IsForbidden(err):
					refused.Add(1)
				default:
					t.Errorf("resizing ConfigMap %d through replica %s: %v", i, replicas[(i+1)%3].Name, err)
				}
			})
		}
		wg.Wait()
		if resized.Load() != 4 || refused.Load() != 2 {
			t.Errorf("%d resizes admitted and %d refused for room of 14 (each grows by 3), want 4 and 2", resized.Load(), refused.Load())
		}
		// What is stored is what is charged.
		f.WaitBucket(quotatest.N(20, 6+3*resized.Load(), 14-3*resized.Load()), "units")
		list := &corev1.ConfigMapList{}
		if err := f.C.List(ctx, list, client.InNamespace(f.NS)); err != nil {
			t.Fatal(err)
		}
		var stored int64
		for _, cm := range list.Items {
			n, _ := strconv.ParseInt(cm.Data["units"], 10, 64)
			stored += n
		}
		if stored != 6+3*resized.Load() {
			t.Errorf("the stored ConfigMaps hold %d units, the bucket %d", stored, 6+3*resized.Load())
		}
	})
	t.Run("plane creates", func(t *testing.T) { planeCreatesOnEveryReplica(t, replicas) })
	t.Run("member reviews", func(t *testing.T) { memberReviewsOnEveryReplica(t, replicas) })
	t.Run("quota reviews", func(t *testing.T) { quotaReviewsOnEveryReplica(t, replicas) })
	t.Run("identity leases", func(t *testing.T) { identityLeasePerReplica(t, replicas) })
}

// identityLeasePerReplica: each replica's API server keeps an identity
// Lease of its own in kube-system. Upstream names it from the host name,
// which these replicas share: they overwrote one Lease and each logged
// "Failed to update lease … the object has been modified" every ten
// seconds. By now (well past one renewal) every replica has renewed its
// own, and none logged the conflict.
func identityLeasePerReplica(t *testing.T, replicas []*replica) {
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		leases, err := replicas[0].Client.CoordinationV1().Leases(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: "apiserver.kubernetes.io/identity=quotaplane"})
		if err != nil {
			return false, err
		}
		return len(leases.Items) == len(replicas), nil
	})
	if err != nil {
		t.Errorf("want one API server identity Lease per replica (%d) in kube-system: %v", len(replicas), err)
	}
	for _, r := range replicas {
		if n := strings.Count(r.Stderr.String(), "Failed to update lease"); n > 0 {
			t.Errorf("replica %s logged %q %d times: replicas share an identity Lease", r.Name, "Failed to update lease", n)
		}
	}
}

// quotaReviewsOnEveryReplica: a QuotaReview of five Secrets against room
// for three answers the same through every replica — the followers ask the
// leader's engine — and takes nothing.
func quotaReviewsOnEveryReplica(t *testing.T, replicas []*replica) {
	f := quotatest.NewFixture(t, quotatest.NewClient(t, replicas[0].Config))
	f.SecretsPolicy(3)
	r := &quotav1alpha1.QuotaReview{}
	for i := range 5 {
		raw := fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s-%d","namespace":%q}}`, i, f.NS)
		r.Spec.Objects = append(r.Spec.Objects, runtime.RawExtension{Raw: []byte(raw)})
	}
	for _, rep := range replicas {
		got, err := versioned.NewForConfigOrDie(rep.Config).QuotaV1alpha1().QuotaReviews().Create(t.Context(), r, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("a review through replica %s: %v", rep.Name, err)
		}
		var fits []int32
		for _, o := range got.Status.Objects {
			if o.Result == quotav1alpha1.ReviewFits {
				fits = append(fits, o.Index)
			}
		}
		if got.Status.Refused != 2 || fmt.Sprint(fits) != "[0 1 2]" {
			t.Errorf("through replica %s: %d refused, fits %v: %s", rep.Name, got.Status.Refused, fits, got.Status.Message)
		}
	}
	f.WaitBucket(quotatest.N(3, 0, 3), "secrets")
}
