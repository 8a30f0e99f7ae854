package grants

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/admission/delegation"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

const timeout = 30 * time.Second

// world is one test's resource types, consumer and namespace. The
// consumer's bucket namespace exists, as an organization's does.
type world struct {
	*quotatest.Fixture
}

func newWorld(t *testing.T, resourceTypes ...string) *world {
	t.Helper()
	return newWorldOn(t, srv.Config, resourceTypes...)
}

// newWorldOn makes a world on the server cfg reaches.
func newWorldOn(t *testing.T, cfg *rest.Config, resourceTypes ...string) *world {
	t.Helper()
	f := quotatest.NewFixture(t, quotatest.NewClient(t, cfg))
	w := &world{f}
	w.namespace(f.BucketNS)
	if len(resourceTypes) > 0 {
		f.Register(resourceTypes...)
	}
	return w
}

func (w *world) namespace(name string) {
	w.T.Helper()
	// A platform namespace: the policies' grants in it name any consumer.
	err := w.C.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{delegation.PlatformNamespaceLabel: "true"}}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		w.T.Fatal(err)
	}
}

// tierPolicy is a GrantCreationPolicy named <id>-name that gives each
// ConfigMap of the world's namespace labelled tier=<tier> a grant of amount
// of the resource type rt to the world's organization, named
// <configmap>-<name> in the ConfigMap's namespace. mutate edits it before
// it is created.
func (w *world) tierPolicy(name, tier, rt string, amount int64, mutate ...func(*quotav1alpha1.GrantCreationPolicy)) *quotav1alpha1.GrantCreationPolicy {
	w.T.Helper()
	p := w.tierPolicyObject(name, tier, rt, amount, mutate...)
	if err := w.C.Create(context.Background(), p); err != nil {
		w.T.Fatal(err)
	}
	w.T.Cleanup(func() { _ = w.C.Delete(context.Background(), p) })
	return p
}

// tierPolicyObject is the policy tierPolicy creates, not created.
func (w *world) tierPolicyObject(name, tier, rt string, amount int64, mutate ...func(*quotav1alpha1.GrantCreationPolicy)) *quotav1alpha1.GrantCreationPolicy {
	p := &quotav1alpha1.GrantCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: w.ID + "-" + name}}
	p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "ConfigMap"}
	p.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{
		{Expression: fmt.Sprintf("trigger.metadata.namespace == %q", w.NS)},
		{Expression: fmt.Sprintf("has(trigger.metadata.labels) && 'tier' in trigger.metadata.labels && trigger.metadata.labels['tier'] == %q", tier)},
	}
	t := &p.Spec.Target.ResourceGrantTemplate
	t.Metadata.Name = "{{ trigger.metadata.name }}-" + name
	t.Metadata.Namespace = "{{ .trigger.metadata.namespace }}"
	t.Metadata.Labels = map[string]string{"tier": "{{ trigger.metadata.labels.tier }}"}
	t.Spec.ConsumerRef = quotav1alpha1.TemplateConsumerRef{APIGroup: w.Org.APIGroup, Kind: w.Org.Kind, Name: w.Org.Name}
	t.Spec.Allowances = []quotav1alpha1.GrantTemplateAllowance{{ResourceType: w.RT(rt), Buckets: []quotav1alpha1.GrantTemplateBucket{{Amount: amount}}}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

// configMap creates a ConfigMap in the world's namespace with the labels.
func (w *world) configMap(name string, labels ...string) *corev1.ConfigMap {
	w.T.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.NS, Labels: map[string]string{}}}
	for i := 0; i+1 < len(labels); i += 2 {
		cm.Labels[labels[i]] = labels[i+1]
	}
	if err := w.C.Create(context.Background(), cm); err != nil {
		w.T.Fatal(err)
	}
	return cm
}

func (w *world) update(obj client.Object, change func()) {
	w.T.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := w.C.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change()
		return w.C.Update(context.Background(), obj)
	})
	if err != nil {
		w.T.Fatal(err)
	}
}

// waitReady waits for the policy's Ready condition at its current
// generation with the status and reason, and returns it.
func (w *world) waitReady(p *quotav1alpha1.GrantCreationPolicy, status metav1.ConditionStatus, reason string) metav1.Condition {
	w.T.Helper()
	return w.waitCondition(p, quotav1alpha1.PolicyConditionReady, status, reason)
}

func (w *world) waitCondition(p *quotav1alpha1.GrantCreationPolicy, condType string, status metav1.ConditionStatus, reason string) metav1.Condition {
	w.T.Helper()
	return w.waitConditionSaying(p, condType, status, reason, "")
}

// waitConditionSaying is waitCondition for a condition whose message also
// contains saying.
func (w *world) waitConditionSaying(p *quotav1alpha1.GrantCreationPolicy, condType string, status metav1.ConditionStatus, reason, saying string) metav1.Condition {
	w.T.Helper()
	var got *metav1.Condition
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := w.C.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return false, nil
		}
		got = meta.FindStatusCondition(p.Status.Conditions, condType)
		if condType == quotav1alpha1.GrantPolicyConditionGrantsSynced {
			// Kept beside the conditions, which hold Ready alone as in the
			// reference implementation.
			if meta.FindStatusCondition(p.Status.Conditions, condType) != nil {
				return false, fmt.Errorf("GrantsSynced is among the conditions: %+v", p.Status.Conditions)
			}
			got = p.Status.GrantsSynced
		}
		return got != nil && got.Status == status && got.Reason == reason && got.ObservedGeneration == p.Generation &&
			p.Status.ObservedGeneration == p.Generation && strings.Contains(got.Message, saying), nil
	})
	if err != nil {
		w.T.Fatalf("GrantCreationPolicy %s never had %s=%s (%s) saying %q at generation %d; it has %+v", p.Name, condType, status, reason, saying, p.Generation, p.Status.Conditions)
	}
	return *got
}

// grantsOf lists the grants labelled with the policy, as kubectl get
// resourcegrants -l quota.miloapis.com/grant-policy=<name> does.
func (w *world) grantsOf(policy string) []quotav1alpha1.ResourceGrant {
	w.T.Helper()
	list := &quotav1alpha1.ResourceGrantList{}
	if err := w.C.List(context.Background(), list, client.MatchingLabels{quotav1alpha1.GrantPolicyLabel: policy}); err != nil {
		w.T.Fatal(err)
	}
	return list.Items
}

// waitGrants waits until the policy has exactly the named grants
// (namespace/name) and returns them.
func (w *world) waitGrants(policy string, want ...string) []quotav1alpha1.ResourceGrant {
	w.T.Helper()
	var got []quotav1alpha1.ResourceGrant
	var names []string
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		got = w.grantsOf(policy)
		names = names[:0]
		for _, g := range got {
			if g.DeletionTimestamp == nil {
				names = append(names, g.Namespace+"/"+g.Name)
			}
		}
		return sameSet(names, want) && len(got) == len(want), nil
	})
	if err != nil {
		w.T.Fatalf("policy %s has grants %v, want %v", policy, names, want)
	}
	return got
}

// stillNoGrants checks, for a while, that the policy makes no grant.
func (w *world) stillNoGrants(policy string, d time.Duration) {
	w.T.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if g := w.grantsOf(policy); len(g) > 0 {
			w.T.Fatalf("policy %s made grant %s/%s", policy, g[0].Namespace, g[0].Name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		seen[s]--
		if seen[s] < 0 {
			return false
		}
	}
	return true
}

// waitEvent waits for an event with the reason on the object named
// namespace/name, whose message contains text.
func (w *world) waitEvent(namespace, name, reason, text string) {
	w.T.Helper()
	kube := kubernetes.NewForConfigOrDie(srv.Config)
	evNS := namespace
	if evNS == "" {
		evNS = metav1.NamespaceDefault
	}
	var seen []string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := kube.CoreV1().Events(evNS).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false, nil
		}
		seen = seen[:0]
		for _, e := range list.Items {
			seen = append(seen, e.Reason+": "+e.Message)
			if e.Reason == reason && strings.Contains(e.Message, text) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		w.T.Fatalf("no %s event mentioning %q on %s/%s; events: %q", reason, text, namespace, name, seen)
	}
}

// metric reads one unlabelled series of the server's /metrics.
func metric(t *testing.T, name string) float64 {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(srv.Config)
	raw, err := kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+" ") {
			v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(line, name)), 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("metric %s is not served", name)
	return 0
}

// waitMetric waits until the metric shows want.
func waitMetric(t *testing.T, name string, want float64) {
	t.Helper()
	var got float64
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		got = metric(t, name)
		return got == want, nil
	})
	if err != nil {
		t.Fatalf("%s is %v, want %v", name, got, want)
	}
}
