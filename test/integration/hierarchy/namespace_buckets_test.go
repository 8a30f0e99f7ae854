package hierarchy

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/test/tools"
)

// TestANamespacesBucketsAreInTheNamespace: a ResourceQuota user looks for a
// namespace's quota in the namespace. A Namespace consumer's bucket, kept
// in the system namespace under the reference's name, is also shown in the
// namespace itself (a projected copy); kubectl's columns read resource
// type, used, limit, percent and placement (Projection); -o wide adds the
// consumer's kind and name within 190 columns; the short name quota stays
// ResourceQuota's.
func TestANamespacesBucketsAreInTheNamespace(t *testing.T) {
	kubectl := tools.Require(t, tools.Kubectl)
	ctx := context.Background()
	w := newWorld(t)
	// Names of a fixed, realistic length: the width checked below depends
	// on them (a 71-character bucket name, a namespace, a resource type).
	n := time.Now().UnixNano() % 1_000_000
	dev := fmt.Sprintf("dev-%06d", n)
	w.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dev}})
	rt := fmt.Sprintf("core/configmaps-%06d", n) // as long as a real one (compute.example.com/vcpus)
	w.create(&quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: w.org + "-cm"}, Spec: quotav1alpha1.ResourceRegistrationSpec{
		ConsumerType: quotav1alpha1.ConsumerTypeRef{Kind: "Namespace"}, Type: quotav1alpha1.RegistrationTypeAllocation,
		ResourceType: quotav1alpha1.ResourceType(rt), BaseUnit: "configmap", ClaimingResources: []quotav1alpha1.ClaimingResource{{Kind: "ConfigMap"}}}})
	system := engine.DefaultOptions().SystemNamespace
	consumer := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: dev}
	g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "ns-" + dev, Namespace: system}, Spec: quotav1alpha1.ResourceGrantSpec{
		ConsumerRef: consumer, Allowances: []quotav1alpha1.Allowance{{ResourceType: quotav1alpha1.ResourceType(rt), Buckets: []quotav1alpha1.GrantBucket{{Amount: 8}}}}}}
	w.create(g)
	w.waitActive(g)
	c := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "three", Namespace: dev}, Spec: quotav1alpha1.ResourceClaimSpec{
		ConsumerRef: consumer, Requests: []quotav1alpha1.ResourceRequest{{ResourceType: quotav1alpha1.ResourceType(rt), Amount: 3}}}}
	w.create(c)
	w.decided(c)

	name := quota.BucketName(quota.BucketID{Consumer: quota.ConsumerID{Kind: "Namespace", Name: dev}, ResourceType: rt})
	var own, shown quotav1alpha1.AllowanceBucket
	w.poll("the bucket in the system namespace and its copy in "+dev, func() bool {
		return w.admin.Get(ctx, client.ObjectKey{Namespace: system, Name: name}, &own) == nil &&
			w.admin.Get(ctx, client.ObjectKey{Namespace: dev, Name: name}, &shown) == nil &&
			shown.Status.Allocated == 3 && shown.Status.Limit == 8
	})
	if shown.Labels[quotav1alpha1.LabelProjectedFrom] != system {
		t.Errorf("the copy in %s has label %s=%q; want %q", dev, quotav1alpha1.LabelProjectedFrom, shown.Labels[quotav1alpha1.LabelProjectedFrom], system)
	}
	if own.Status.UsedPercent == nil || *own.Status.UsedPercent != 37 {
		t.Errorf("status.usedPercent of 3 of 8: %v; want 37", own.Status.UsedPercent)
	}

	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(kubectl, append([]string{"--kubeconfig", srv.Kubeconfig}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	table := run("get", "allowancebuckets", "-n", dev)
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME RESOURCE TYPE USED LIMIT USED% PLACEMENT AGE" {
		t.Fatalf("kubectl get allowancebuckets -n %s:\n%s\nwant the header NAME RESOURCE TYPE USED LIMIT USED%% PLACEMENT AGE and one bucket", dev, table)
	}
	if f := strings.Fields(lines[1]); len(f) < 6 || f[0] != name || f[1] != rt || f[2] != "3" || f[3] != "8" || f[4] != "37" || f[5] != "Projection" {
		t.Errorf("the row %q; want %s %s 3 8 37 Projection", lines[1], name, rt)
	}
	wide := run("get", "allowancebuckets", "-n", dev, "-o", "wide")
	for _, l := range strings.Split(strings.TrimRight(wide, "\n"), "\n") {
		if len(l) > 190 {
			t.Errorf("-o wide has a line of %d columns, past 190:\n%s", len(l), l)
		}
	}
	if !strings.Contains(wide, "CONSUMER KIND") || !strings.Contains(wide, "Namespace") || !strings.Contains(wide, dev) {
		t.Errorf("-o wide does not show the consumer's kind and name:\n%s", wide)
	}
	// Neither a short name nor a category: kubectl expands a category
	// before a short name, so a category quota would take kubectl get quota.
	for _, f := range strings.Fields(run("api-resources", "--api-group", quotav1alpha1.GroupName, "-o", "wide")) {
		for _, name := range strings.Split(f, ",") {
			if name == "quota" {
				t.Errorf("a kind of %s takes the name quota, ResourceQuota's short name", quotav1alpha1.GroupName)
			}
		}
	}
	// An amount may be written as a quantity, so kubectl shows
	// <IntOrString> (test/integration/nativeapi); the text says what is
	// stored and read.
	if got := run("explain", "resourceclaims.spec.requests.amount"); !strings.Contains(strings.Join(strings.Fields(got), " "), "Always stored and read as an integer in base units") {
		t.Errorf("kubectl explain resourceclaims.spec.requests.amount does not say the amount is read as an integer:\n%s", got)
	}
	if got := run("get", "quota", "-n", dev); !strings.Contains(got, "No resources found") {
		t.Errorf("kubectl get quota -n %s (ResourceQuotas, none): %s", dev, got)
	}
}
