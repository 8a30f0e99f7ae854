package clusters

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// world is the quota plane, two member clusters with their webhooks, and a
// fixture organization with a global limit on Secrets and on Deployment
// replicas.
type world struct {
	bin      string
	quota    *cluster
	members  []*cluster
	webhooks []*webhook
	f        *quotatest.Fixture
	secrets  *quotav1alpha1.ClaimCreationPolicy
	replicas *quotav1alpha1.ClaimCreationPolicy
	ignore   *quotav1alpha1.ClaimCreationPolicy
	limit    int64
}

func newWorld(t testing.TB, limit int64, memberNames ...string) *world {
	t.Helper()
	w := &world{bin: quotatest.BuildBinary(t), limit: limit}
	w.quota = startCluster(t, w.bin, "quota")
	for _, name := range memberNames {
		w.members = append(w.members, startCluster(t, w.bin, name))
	}
	w.f = quotatest.NewFixture(t, w.quota.client)
	w.secrets = w.f.SecretsPolicy(limit)
	w.f.RegisterClaimedBy([]string{"replicas"}, quotav1alpha1.ClaimingResource{APIGroup: "apps", Kind: "Deployment"})
	w.f.Grant("g-replicas", map[string][]quotatest.Bucket{"replicas": {{Amount: 5}}})
	w.replicas = w.f.Policy("replicas", "apps/v1", "Deployment", "replicas", intstr.FromString("{{ trigger.spec.replicas }}"))
	w.f.WaitPolicyReady(w.replicas, metav1.ConditionTrue, w.deployment("in-force-probe", 1))
	// ConfigMaps labelled quota=ignore: a policy that admits fail-open.
	w.f.RegisterClaimedBy([]string{"configmaps"}, quotav1alpha1.ClaimingResource{Kind: "ConfigMap"})
	w.f.Grant("g-configmaps", map[string][]quotatest.Bucket{"configmaps": {{Amount: 10}}})
	w.ignore = w.f.Policy("configmaps", "v1", "ConfigMap", "configmaps", intstr.FromInt32(1), func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.FailurePolicy = quotav1alpha1.FailurePolicyIgnore
		p.Spec.Trigger.Constraints = append(p.Spec.Trigger.Constraints, quotav1alpha1.Constraint{Expression: "trigger.metadata.?labels.quota.orValue('') == 'ignore'"})
	})
	w.f.WaitPolicyReady(w.ignore, metav1.ConditionTrue, w.configMap("in-force-probe"))
	for _, m := range w.members {
		// The member's administrator is <cluster>:quotaplane-admin in the
		// quota plane (the webhook's default prefix), allowed to charge the
		// organization.
		w.allowClaims(t, m.name+":quotaplane-admin")
		if err := m.client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.f.NS}}); err != nil {
			t.Fatal(err)
		}
		wh := startWebhook(t, w.bin, w.quota, m, "") // the default prefixes: <cluster>:
		cfg := wh.register(t, w.quota, "quotaplane-system", unchargedNamespace)
		for _, want := range []string{"secrets/scale", "deployments/scale", "failurePolicy: Fail", "kube-system", "sideEffects: NoneOnDryRun"} {
			if !strings.Contains(cfg, want) {
				t.Errorf("print-config for %s lacks %q:\n%s", m.name, want, cfg)
			}
		}
		w.webhooks = append(w.webhooks, wh)
		mf := &quotatest.Fixture{T: t, C: m.client, NS: w.f.NS}
		mf.WaitPolicyInForce(corev1.SchemeGroupVersion.WithResource("secrets"), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: w.f.NS}}, w.secrets.Name, w.secrets.Generation)
	}
	return w
}

// unchargedNamespace is left alone by the members' webhooks: the baseline
// of the benchmark.
const unchargedNamespace = "no-webhook"

// allowClaims lets user charge the fixture's organization in the quota plane.
func (w *world) allowClaims(t testing.TB, user string) {
	t.Helper()
	ctx := context.Background()
	name := "claim-" + strings.NewReplacer(":", "-").Replace(user) + "-" + w.f.ID
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{w.f.Org.APIGroup}, Resources: []string{"organizations"}, Verbs: []string{"claim"}, ResourceNames: []string{w.f.Org.Name}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		if err := w.quota.client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	quotatest.WaitAllowed(t, []kubernetes.Interface{w.quota.kube}, user, nil, w.claimAttributes())
}

// claimAttributes are the quota plane's question for charging the
// fixture's organization.
func (w *world) claimAttributes() *authorizationv1.ResourceAttributes {
	return &authorizationv1.ResourceAttributes{Verb: "claim", Group: w.f.Org.APIGroup, Resource: "organizations", Name: w.f.Org.Name}
}

func (w *world) deployment(name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.f.NS}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(replicas),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example"}}}},
	}}
}

func (w *world) configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.f.NS, Labels: map[string]string{"quota": "ignore"}}}
}

func (w *world) secret(name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.f.NS}}
}

// bucket is the organization's bucket of a resource type in the quota plane.
func (w *world) bucket(ctx context.Context, rt string) (*quotav1alpha1.AllowanceBucket, error) {
	b := &quotav1alpha1.AllowanceBucket{}
	err := w.quota.client.Get(ctx, client.ObjectKey{Namespace: w.f.BucketNS, Name: w.f.BucketName(rt)}, b)
	return b, err
}

// waitAllocated waits until the bucket shows want allocated.
func (w *world) waitAllocated(t testing.TB, rt string, want int64) *quotav1alpha1.AllowanceBucket {
	t.Helper()
	var b *quotav1alpha1.AllowanceBucket
	eventually(t, 60*time.Second, fmt.Sprintf("bucket %s shows %d allocated", rt, want), func(ctx context.Context) error {
		var err error
		if b, err = w.bucket(ctx, rt); err != nil {
			return err
		}
		if b.Status.Allocated != want {
			return fmt.Errorf("allocated %d", b.Status.Allocated)
		}
		return nil
	})
	return b
}

// storedSecrets counts the fixture's Secrets stored in each member.
func (w *world) storedSecrets(t testing.TB) []int {
	t.Helper()
	out := make([]int, len(w.members))
	for i, m := range w.members {
		list, err := m.kube.CoreV1().Secrets(w.f.NS).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out[i] = len(list.Items)
	}
	return out
}

func (w *world) deleteSecrets(t testing.TB) {
	t.Helper()
	for _, m := range w.members {
		if err := m.kube.CoreV1().Secrets(w.f.NS).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func isQuotaRefusal(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), quota.RefusalPrefix)
}

// One quota across two member clusters: decided exactly, shown per
// cluster, kept true to the clusters' objects through deletes, a webhook
// outage and a quota plane outage.
func TestGlobalQuotaAcrossClusters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three quotaplane serve processes and two webhooks (80 s); run without -short")
	}
	const limit = 6
	w := newWorld(t, limit, "east", "west")
	ctx := context.Background()
	east, west := w.members[0], w.members[1]
	rt := "secrets"

	t.Run("creates in one member up to the global limit, refused after", func(t *testing.T) {
		for i := range limit {
			if _, err := east.kube.CoreV1().Secrets(w.f.NS).Create(ctx, w.secret(fmt.Sprintf("s%d", i)), metav1.CreateOptions{}); err != nil {
				t.Fatalf("create %d of %d in east: %v", i+1, limit, err)
			}
		}
		for _, m := range w.members {
			_, err := m.kube.CoreV1().Secrets(w.f.NS).Create(ctx, w.secret("one-too-many"), metav1.CreateOptions{})
			if !isQuotaRefusal(err) {
				t.Fatalf("create %d+1 in %s: %v; want the quota refusal", limit, m.name, err)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("%d in cluster east", limit)) {
				t.Errorf("the refusal in %s does not say where the usage is: %v", m.name, err)
			}
		}
		b := w.waitAllocated(t, rt, limit)
		if len(b.Status.Clusters) != 1 || b.Status.Clusters[0] != (quotav1alpha1.ClusterUsage{Name: "east", Allocated: limit}) {
			t.Errorf("bucket clusters = %+v; want east %d", b.Status.Clusters, limit)
		}
		w.deleteSecrets(t)
		w.waitAllocated(t, rt, 0)
	})

	t.Run("4L concurrent creates over both members store exactly L, every round", func(t *testing.T) {
		for round := range 3 {
			var stored atomic.Int64
			quotatest.ForEach(t, 4*limit, func(i int) error {
				m := w.members[i%2]
				_, err := m.kube.CoreV1().Secrets(w.f.NS).Create(ctx, w.secret(fmt.Sprintf("r%d-%d", round, i)), metav1.CreateOptions{})
				switch {
				case err == nil:
					stored.Add(1)
				case isQuotaRefusal(err):
				default:
					return fmt.Errorf("create %d in %s: %w", i, m.name, err)
				}
				return nil
			})
			counts := w.storedSecrets(t)
			if got := int64(counts[0] + counts[1]); got != limit || stored.Load() != limit {
				t.Fatalf("round %d: %d admitted, %d stored (east %d, west %d); want exactly %d", round, stored.Load(), got, counts[0], counts[1], limit)
			}
			b := w.waitAllocated(t, rt, limit)
			var sum int64
			for _, c := range b.Status.Clusters {
				sum += c.Allocated
				want := int64(counts[map[string]int{"east": 0, "west": 1}[c.Name]])
				if c.Allocated != want {
					t.Errorf("round %d: bucket shows %d for %s, which stores %d", round, c.Allocated, c.Name, want)
				}
			}
			if sum != limit {
				t.Errorf("round %d: per-cluster usage %+v sums to %d, want %d", round, b.Status.Clusters, sum, limit)
			}
			// Deleting in the members frees the quota.
			w.deleteSecrets(t)
			w.waitAllocated(t, rt, 0)
		}
	})

	t.Run("two webhook replicas give the same answers", func(t *testing.T) {
		second := startWebhook(t, w.bin, w.quota, east, "east:")
		defer second.stop()
		ask := func(wh *webhook, dryRun bool) *admissionv1.AdmissionResponse {
			return wh.review(t, &admissionv1.AdmissionRequest{UID: "r", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Secret"},
				Resource: metav1.GroupVersionResource{Version: "v1", Resource: "secrets"}, Namespace: w.f.NS, Name: "asked", Operation: admissionv1.Create,
				DryRun: ptr.To(dryRun), UserInfo: authenticationv1.UserInfo{Username: "quotaplane-admin"},
				Object: runtime.RawExtension{Raw: []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"asked","namespace":%q,"uid":"asked-1"}}`, w.f.NS))}})
		}
		a, b := ask(w.webhooks[0], true), ask(second, true)
		if !a.Allowed || !b.Allowed || !slices.Equal(a.Warnings, b.Warnings) || len(a.Warnings) == 0 {
			t.Fatalf("a dry run answered differently: %+v and %+v", a, b)
		}
		for i := range limit {
			if _, err := west.kube.CoreV1().Secrets(w.f.NS).Create(ctx, w.secret(fmt.Sprintf("full-%d", i)), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// Shown before they are deleted: a wait for 0 afterwards must not
		// be met by the bucket's status from before these creates.
		w.waitAllocated(t, rt, limit)
		a, b = ask(w.webhooks[0], false), ask(second, false)
		if a.Allowed || b.Allowed || a.Result.Message != b.Result.Message || !strings.Contains(a.Result.Message, quota.RefusalPrefix) {
			t.Fatalf("a create over the limit answered differently: %+v and %+v", a.Result, b.Result)
		}
		w.deleteSecrets(t)
		w.waitAllocated(t, rt, 0)
	})

	t.Run("a create the member refuses after the webhook admitted it is released", func(t *testing.T) {
		if _, err := east.kube.CoreV1().Secrets(w.f.NS).Create(ctx, w.secret("dup"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The name is taken: the member refuses the second create after
		// admission, where the quota plane granted it.
		if _, err := east.kube.CoreV1().Secrets(w.f.NS).Create(ctx, w.secret("dup"), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
			t.Fatalf("second create of dup: %v; want AlreadyExists", err)
		}
		w.waitAllocated(t, rt, 1) // within --release-after (6 s) and a reconcile
		if err := east.kube.CoreV1().Secrets(w.f.NS).Delete(ctx, "dup", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		w.waitAllocated(t, rt, 0)
	})

	t.Run("an update that grows a Deployment is charged, also through scale", func(t *testing.T) {
		d := w.deployment("web", 1)
		deployments := west.kube.AppsV1().Deployments(w.f.NS)
		if _, err := deployments.Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		w.waitAllocated(t, "replicas", 1)
		if _, err := deployments.UpdateScale(ctx, "web", &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: w.f.NS}, Spec: autoscalingv1.ScaleSpec{Replicas: 3}}, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("scaling to 3: %v", err)
		}
		w.waitAllocated(t, "replicas", 3)
		cur, err := deployments.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Spec.Replicas = ptr.To[int32](6)
		if _, err := deployments.Update(ctx, cur, metav1.UpdateOptions{}); !isQuotaRefusal(err) {
			t.Fatalf("growing to 6 replicas of a limit of 5: %v; want the quota refusal", err)
		}
		cur.Spec.Replicas = ptr.To[int32](5)
		if _, err := deployments.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("growing to 5: %v", err)
		}
		w.waitAllocated(t, "replicas", 5)
		if err := deployments.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		w.waitAllocated(t, "replicas", 0)
	})

	t.Run("a member's administrators are not the quota plane's", func(t *testing.T) {
		cfg := rest.CopyConfig(east.config)
		// ... not even claiming to be the webhook charging an existing object.
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "mallory", Groups: []string{"system:masters"},
			Extra: map[string][]string{"quota.miloapis.com/existing-object": {"true"}}}
		err := quotatest.NewClient(t, cfg).Create(ctx, w.secret("mallory"))
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `"east:mallory" may not charge quota`) {
			t.Fatalf("mallory, an administrator of east, charging the organization: %v; want the claim authorization refusal", err)
		}
	})

	t.Run("a member's service account is not the quota plane's", w.testMemberIdentities)
	t.Run("the review path believes a credential for its own cluster only", w.testReviewPathTrust)
	t.Run("the workloads example's Pod policy in members", w.testWorkloadsPolicy)

	t.Run("an object created while the webhook was down is charged by the reconcile", func(t *testing.T) {
		wh := w.webhooks[0]
		wh.stop()
		// The operator bypasses the webhook while it is down.
		if err := east.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "quotaplane-east", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "the member stores a Secret without the webhook", func(ctx context.Context) error {
			_, err := east.kube.CoreV1().Secrets(w.f.NS).Create(ctx, w.secret("bypassed"), metav1.CreateOptions{})
			return err
		})
		wh.restart(t)
		wh.register(t, w.quota, "quotaplane-system", unchargedNamespace)
		w.waitAllocated(t, rt, 1)
		eventually(t, 30*time.Second, "an Event says the Secret was charged late", func(ctx context.Context) error {
			list, err := east.kube.CoreV1().Events(w.f.NS).List(ctx, metav1.ListOptions{FieldSelector: "reason=QuotaChargedLate"})
			if err != nil || len(list.Items) == 0 {
				return fmt.Errorf("no QuotaChargedLate event (%v)", err)
			}
			if !strings.Contains(list.Items[0].Message, "bypassed") {
				return fmt.Errorf("event says %q", list.Items[0].Message)
			}
			return nil
		})
		if err := east.kube.CoreV1().Secrets(w.f.NS).Delete(ctx, "bypassed", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		w.waitAllocated(t, rt, 0)
	})

	t.Run("the quota plane stopped: member creates refused as unavailable, nothing leaked", func(t *testing.T) {
		if _, err := west.kube.CoreV1().Secrets(w.f.NS).Create(ctx, w.secret("before"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		w.waitAllocated(t, rt, 1)
		w.quota.stop()
		for i, m := range w.members {
			_, err := m.kube.CoreV1().Secrets(w.f.NS).Create(ctx, w.secret(fmt.Sprintf("during-%d", i)), metav1.CreateOptions{})
			if err == nil || !strings.Contains(err.Error(), "quota plane is unavailable") {
				t.Fatalf("create in %s while the quota plane is down: %v; want the unavailable refusal\nwebhook:\n%s", m.name, err, w.webhooks[i].stderr.Tail())
			}
		}
		// Every policy governing a ConfigMap says Ignore: admitted, and
		// said to be admitted without quota.
		warned := &quotatest.Warnings{}
		cfg := rest.CopyConfig(west.config)
		cfg.WarningHandler = warned
		if err := quotatest.NewClient(t, cfg).Create(ctx, w.configMap("fail-open")); err != nil {
			t.Fatalf("a ConfigMap whose only policy says Ignore, while the quota plane is down: %v", err)
		}
		if !warned.Contains("admitted WITHOUT quota (fail-open)") {
			t.Errorf("the fail-open create was not warned about: %v", warned.All())
		}
		w.quota.start(t, true)
		eventually(t, 60*time.Second, "member creates are decided again", func(ctx context.Context) error {
			_, err := east.kube.CoreV1().Secrets(w.f.NS).Create(ctx, w.secret("after"), metav1.CreateOptions{})
			return err
		})
		if counts := w.storedSecrets(t); counts[0]+counts[1] != 2 {
			t.Fatalf("stored %v; want before and after only", counts)
		}
		b := w.waitAllocated(t, rt, 2)
		if len(b.Status.Clusters) != 2 {
			t.Errorf("bucket clusters = %+v; want east 1 and west 1", b.Status.Clusters)
		}
		// The ConfigMap admitted fail-open is charged once the quota plane
		// is back.
		w.waitAllocated(t, "configmaps", 1)
	})

	t.Run("verify finds nothing wrong", func(t *testing.T) {
		// The claims of refused creates are released within release-after.
		time.Sleep(7 * time.Second)
		for _, m := range w.members {
			out, err := exec.Command(w.bin, "verify", "--kubeconfig", w.quota.kubeconfig, "--member-kubeconfig", m.kubeconfig, "--cluster-name", m.name,
				"--exclude-namespaces", "quotaplane-system,"+unchargedNamespace).CombinedOutput()
			var exit *exec.ExitError
			if err != nil && !errors.As(err, &exit) {
				t.Fatal(err)
			}
			if err != nil || !strings.Contains(string(out), "every object the policies charge has its claim") {
				t.Errorf("verify of member %s: %v\n%s", m.name, err, out)
			}
		}
		out, err := exec.Command(w.bin, "verify", "--data-dir", w.quota.dataDir).CombinedOutput()
		if err != nil {
			t.Errorf("verify of the quota plane: %v\n%s", err, out)
		}
	})
}
