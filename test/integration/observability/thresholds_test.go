package observability

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestThresholdsConditionAndEvents: a bucket of limit 100 filled to 80 and
// 95 units reports WarningThresholdReached and CriticalThresholdReached, each
// with a Warning Event; released to 92 it stays critical (hysteresis: 5
// points), to 89 it is back to warning and to 74 below the thresholds, each
// drop with a Normal Event. A registration's own thresholds (50/60) apply to
// its buckets.
func TestThresholdsConditionAndEvents(t *testing.T) {
	c := quotatest.NewClient(t, srv.Config)
	kube := kubernetes.NewForConfigOrDie(srv.Config)
	f := quotatest.NewFixture(t, c)
	f.Register("cpu", "mem")
	f.Grant("g", map[string][]quotatest.Bucket{"cpu": {{Amount: 100}}, "mem": {{Amount: 100}}})
	f.WaitBucket(quotatest.N(100, 0, 100), "cpu")

	claims := 0
	fill := func(amount int64) {
		claims++
		name := fmt.Sprintf("c%d", claims)
		f.Claim(name, quotatest.R("cpu", amount))
		if cond := f.Decided(name); cond.Status != metav1.ConditionTrue {
			t.Fatalf("claim %s not granted: %s", name, cond.Message)
		}
	}
	release := func(name string) {
		if err := c.Delete(context.Background(), f.GetClaim(name)); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(rt string, allocated int64, reason string) {
		t.Helper()
		name := f.BucketName(rt)
		var last *metav1.Condition
		err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			b := &quotav1alpha1.AllowanceBucket{}
			if err := c.Get(ctx, types.NamespacedName{Namespace: f.BucketNS, Name: name}, b); err != nil {
				return false, nil
			}
			last = meta.FindStatusCondition(b.Status.Conditions, quotav1alpha1.BucketConditionApproachingLimit)
			return b.Status.Allocated == allocated && last != nil && last.Reason == reason, nil
		})
		if err != nil {
			t.Fatalf("bucket %s at %d allocated: ApproachingLimit %+v, want reason %s", rt, allocated, last, reason)
		}
	}
	events := func(rt string) []corev1.Event {
		list, err := kube.CoreV1().Events(f.BucketNS).List(context.Background(), metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.name", f.BucketName(rt)).String()})
		if err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	waitEvent := func(rt, eventType, reason string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			for _, e := range events(rt) {
				if e.Type == eventType && e.Reason == reason {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("no %s Event %s on bucket %s: %v", eventType, reason, rt, events(rt))
		}
	}

	fill(50)
	fill(29)
	expect("cpu", 79, quotav1alpha1.BucketReasonBelowThresholds)
	fill(1) // 80
	expect("cpu", 80, quotav1alpha1.BucketReasonWarningThreshold)
	waitEvent("cpu", corev1.EventTypeWarning, quotav1alpha1.BucketReasonWarningThreshold)
	fill(12) // 92
	expect("cpu", 92, quotav1alpha1.BucketReasonWarningThreshold)
	fill(3) // 95
	expect("cpu", 95, quotav1alpha1.BucketReasonCriticalThreshold)
	waitEvent("cpu", corev1.EventTypeWarning, quotav1alpha1.BucketReasonCriticalThreshold)
	release("c5") // 92: within 5 points of 95, still critical
	expect("cpu", 92, quotav1alpha1.BucketReasonCriticalThreshold)
	release("c4") // 80: under 90, back to warning
	expect("cpu", 80, quotav1alpha1.BucketReasonWarningThreshold)
	waitEvent("cpu", corev1.EventTypeNormal, quotav1alpha1.BucketReasonWarningThreshold)
	release("c3") // 79: within 5 points of 80, still warning
	expect("cpu", 79, quotav1alpha1.BucketReasonWarningThreshold)
	release("c2") // 50
	expect("cpu", 50, quotav1alpha1.BucketReasonBelowThresholds)
	waitEvent("cpu", corev1.EventTypeNormal, quotav1alpha1.BucketReasonBelowThresholds)
	for _, e := range events("cpu") {
		t.Logf("%s %s: %s", e.Type, e.Reason, e.Message)
	}

	// A registration's own thresholds.
	reg := &quotav1alpha1.ResourceRegistration{}
	if err := c.Get(context.Background(), types.NamespacedName{Name: f.ID + "-mem"}, reg); err != nil {
		t.Fatal(err)
	}
	reg.Spec.Thresholds = &quotav1alpha1.UtilizationThresholds{Warning: 50, Critical: 60}
	if err := c.Update(context.Background(), reg); err != nil {
		t.Fatal(err)
	}
	bad := reg.DeepCopy()
	bad.Spec.Thresholds = &quotav1alpha1.UtilizationThresholds{Warning: 96}
	if err := c.Update(context.Background(), bad); err == nil {
		t.Errorf("a warning threshold above the default critical one was accepted")
	}
	claims++
	f.Claim(fmt.Sprintf("c%d", claims), quotatest.R("mem", 55))
	expect("mem", 55, quotav1alpha1.BucketReasonWarningThreshold)
	claims++
	f.Claim(fmt.Sprintf("c%d", claims), quotatest.R("mem", 5))
	expect("mem", 60, quotav1alpha1.BucketReasonCriticalThreshold)
	waitEvent("mem", corev1.EventTypeWarning, quotav1alpha1.BucketReasonCriticalThreshold)
}
