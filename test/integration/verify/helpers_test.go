package verify

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/internal/verify"
	"github.com/quotaplane/quotaplane/internal/verify/repair"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// etcdPrefix is the test server's --etcd-prefix.
const etcdPrefix = "/registry"

// audit runs verify against s, with etcd unless withoutEtcd.
func audit(t *testing.T, s *testserver.Server, withoutEtcd bool) *verify.Report {
	t.Helper()
	o := *verify.NewOptions()
	o.Kubeconfig = s.Kubeconfig
	o.RecheckAfter = 500 * time.Millisecond
	if !withoutEtcd {
		loc, err := formats.ReadEtcdFile(s.DataDir)
		if err != nil {
			t.Fatal(err)
		}
		o.EtcdServers, o.EtcdCAFile, o.EtcdCertFile, o.EtcdKeyFile = s.EtcdServers, loc.CAFile, loc.CertFile, loc.KeyFile
	}
	began := time.Now()
	r, err := verify.Run(context.Background(), o)
	if err != nil {
		t.Fatalf("verify could not run: %v", err)
	}
	var out strings.Builder
	r.Print(&out)
	t.Logf("verify took %s:\n%s", time.Since(began).Round(time.Millisecond), out.String())
	return r
}

// repairRun runs verify --repair against s, printing its actions to out.
func repairRun(s *testserver.Server, out io.Writer) (*verify.Report, []repair.Action, error) {
	o := *verify.NewOptions()
	o.Kubeconfig = s.Kubeconfig
	o.RecheckAfter = 500 * time.Millisecond
	loc, err := formats.ReadEtcdFile(s.DataDir)
	if err != nil {
		return nil, nil, err
	}
	o.EtcdServers, o.EtcdCAFile, o.EtcdCertFile, o.EtcdKeyFile = s.EtcdServers, loc.CAFile, loc.CertFile, loc.KeyFile
	return repair.Run(context.Background(), repair.Options{Options: o, Timeout: 2 * time.Minute}, out)
}

// found is a discrepancy as tests compare it: its check and the name it is
// about.
type found struct {
	Check verify.Check
	About string
}

// discrepancies lists a report's discrepancies, each named by the first of
// names its problem mentions.
func discrepancies(t *testing.T, r *verify.Report, names ...string) []found {
	t.Helper()
	var out []found
	for _, d := range r.Discrepancies {
		if d.Problem == "" || d.Repair == "" {
			t.Errorf("discrepancy without a problem or a repair: %+v", d)
		}
		about := "?"
		for _, n := range names {
			if strings.Contains(d.Problem, n) {
				about = n
				break
			}
		}
		out = append(out, found{d.Check, about})
	}
	sortFound(out)
	return out
}

// sortFound orders discrepancies by check, then by what they are about.
func sortFound(out []found) {
	sort.Slice(out, func(i, j int) bool {
		if out[i].Check != out[j].Check {
			return out[i].Check < out[j].Check
		}
		return out[i].About < out[j].About
	})
}

func wantDiscrepancies(t *testing.T, r *verify.Report, want []found, names ...string) {
	t.Helper()
	want = slices.Clone(want)
	sortFound(want) // bucket names are hashes: their order is not the test's
	if diff := cmp.Diff(want, discrepancies(t, r, names...)); diff != "" {
		t.Errorf("discrepancies (-want +got):\n%s", diff)
	}
}

func etcdClient(t *testing.T, s *testserver.Server) *clientv3.Client {
	t.Helper()
	c, err := s.EtcdClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// afterPolicySecond waits until objects created now are created after the
// policy's second: objects of that second are skipped as ambiguous.
func afterPolicySecond(p *quotav1alpha1.ClaimCreationPolicy) {
	for time.Now().Unix() <= p.CreationTimestamp.Unix() {
		time.Sleep(50 * time.Millisecond)
	}
}

// createSecret creates a Secret through the API.
func createSecret(t *testing.T, c client.Client, ns, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := c.Create(context.Background(), s); err != nil {
		t.Fatalf("creating Secret %s/%s: %v", ns, name, err)
	}
	return s
}

// claimOf waits until the object with that UID has a granted claim and
// returns it.
func claimOf(t *testing.T, f *quotatest.Fixture, uid string) *quotav1alpha1.ResourceClaim {
	t.Helper()
	var got *quotav1alpha1.ResourceClaim
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list := &quotav1alpha1.ResourceClaimList{}
		if err := f.C.List(ctx, list, client.InNamespace(f.NS)); err != nil {
			return false, nil
		}
		for i, c := range list.Items {
			if c.Annotations[quotav1alpha1.AnnotationResourceUID] == uid && isGranted(&c) {
				got = &list.Items[i]
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the object %s has no granted claim: %v", uid, err)
	}
	return got
}

func isGranted(c *quotav1alpha1.ResourceClaim) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == quotav1alpha1.ClaimConditionGranted {
			return cond.Status == metav1.ConditionTrue
		}
	}
	return false
}

// setDisabled disables or enables a policy and waits until admission sees it.
func setDisabled(t *testing.T, f *quotatest.Fixture, p *quotav1alpha1.ClaimCreationPolicy, disabled bool) {
	t.Helper()
	if err := f.C.Get(context.Background(), client.ObjectKeyFromObject(p), p); err != nil {
		t.Fatal(err)
	}
	p.Spec.Disabled = disabled
	if err := f.C.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	ready := metav1.ConditionTrue
	if disabled {
		ready = metav1.ConditionFalse
	}
	f.WaitCondition(p, quotav1alpha1.PolicyConditionReady, ready)
	probe := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "in-force-probe", Namespace: f.NS}}
	if disabled {
		f.WaitPolicyNotInForce(corev1.SchemeGroupVersion.WithResource("secrets"), probe, p.Name)
	} else {
		f.WaitPolicyInForce(corev1.SchemeGroupVersion.WithResource("secrets"), probe, p.Name, p.Generation)
	}
}

// putJSON writes v as JSON at an etcd key, behind the API server's back.
func putJSON(t *testing.T, c *clientv3.Client, key string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(context.Background(), key, string(data)); err != nil {
		t.Fatal(err)
	}
}

func policyStats(t *testing.T, r *verify.Report, name string) verify.PolicyStats {
	t.Helper()
	for _, p := range r.Policies {
		if p.Name == name {
			return *p
		}
	}
	t.Fatalf("the report has no ClaimCreationPolicy %s", name)
	return verify.PolicyStats{}
}
