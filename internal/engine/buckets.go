package engine

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// Labels on every AllowanceBucket, so that a tenant or a dashboard can select
// the buckets of one consumer.
const (
	LabelConsumerKind   = "quota.miloapis.com/consumer-kind"
	LabelConsumerName   = "quota.miloapis.com/consumer-name"
	LabelResourceType   = "quota.miloapis.com/resource-type"
	LabelManagedBy      = "app.kubernetes.io/managed-by"
	managedByQuotaplane = "quotaplane"
)

func (t *term) writeBucket(ctx context.Context, id quota.BucketID) error {
	t.mu.Lock()
	st, exists := t.eng.Bucket(id)
	var members []quota.ConsumerID
	if exists && id.Consumer.IsGroup() {
		members = t.eng.GroupMembers(id.Consumer)
	}
	t.mu.Unlock()
	ns, err := t.bucketNamespace(id.Consumer)
	if err != nil {
		return err
	}
	// A group's bucket is also projected into the namespace of each of its
	// members' buckets, where their owners read it.
	places := []string{ns}
	for _, m := range members {
		mns, err := t.bucketNamespace(m)
		if err != nil {
			return err
		}
		if !slices.Contains(places, mns) {
			places = append(places, mns)
		}
	}
	name := quota.BucketName(id)
	// A bucket stored in another namespace than its placement (a project
	// whose organization became known, a group's member that left) goes.
	if err := t.deleteMisplacedBuckets(ctx, name, places, exists); err != nil {
		return err
	}
	if !exists {
		return t.deleteBucketIn(ctx, id, ns, name)
	}
	for i, p := range places {
		if err := t.writeBucketIn(ctx, id, st, p, name, i > 0); err != nil {
			return err
		}
	}
	return nil
}

// deleteBucketIn deletes the stored bucket of a bucket that no longer exists.
func (t *term) deleteBucketIn(ctx context.Context, id quota.BucketID, ns, name string) error {
	obj, found, err := t.bucketInformer.GetStore().GetByKey(key(ns, name))
	if err != nil || !found {
		return err
	}
	t.bucketGone(id)
	b := obj.(*quotav1alpha1.AllowanceBucket)
	err = t.r.client.Delete(ctx, b, client.Preconditions{UID: &b.UID})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// LabelProjectedFrom marks a group bucket's copy in a member's namespace: its
// value is the namespace of the group's own bucket.
const LabelProjectedFrom = "quota.miloapis.com/projected-from"

// writeBucketIn writes a bucket that exists into namespace ns: its own
// place, or (projected) a copy in a group member's namespace.
func (t *term) writeBucketIn(ctx context.Context, id quota.BucketID, st quota.BucketStatus, ns, name string, projected bool) error {
	obj, found, err := t.bucketInformer.GetStore().GetByKey(key(ns, name))
	if err != nil {
		return err
	}
	var stored *quotav1alpha1.AllowanceBucket
	if found {
		stored = obj.(*quotav1alpha1.AllowanceBucket)
	} else {
		if err := t.bucketNamespaceReady(ctx, ns); err != nil {
			t.nsWait.wait(ns, id)
			return err
		}
		labels := bucketLabels(id)
		if projected {
			labels[LabelProjectedFrom] = id.Consumer.Namespace
		}
		stored = &quotav1alpha1.AllowanceBucket{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: quotav1alpha1.AllowanceBucketSpec{
				ConsumerRef:  quotav1alpha1.ConsumerRef{APIGroup: id.Consumer.APIGroup, Kind: id.Consumer.Kind, Name: id.Consumer.Name, Namespace: id.Consumer.Namespace},
				ResourceType: quotav1alpha1.ResourceType(id.ResourceType),
				Dimensions:   convert.APIDimensions(st.Dims),
			},
		}
		if err := t.r.client.Create(ctx, stored); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("bucket %s/%s exists but is not in the cache yet", ns, name)
			}
			if apierrors.IsNotFound(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				// The namespace went away since it was seen: wait for it
				// again. Not wrapped: a NotFound would drop the bucket.
				t.forgetNamespace(ns)
				t.nsWait.wait(ns, id)
				return fmt.Errorf("creating bucket %s/%s: its namespace is gone or being deleted (%v); retrying until it exists", ns, name, err)
			}
			return fmt.Errorf("creating bucket %s/%s: %w", ns, name, err)
		}
	}
	want := bucketStatus(stored, st)
	t.setThresholdCondition(&want, stored, st)
	if bucketStatusEqual(stored.Status, want) {
		if !projected {
			t.bucketVerified(id, stored, st, time.Now())
		}
		return nil
	}
	updated := stored.DeepCopy()
	updated.Status = want
	if err := t.r.client.Status().Update(ctx, updated); err != nil {
		return err
	}
	if !projected {
		t.thresholdCrossed(stored, want)
		t.bucketVerified(id, updated, st, time.Now())
	}
	return nil
}

// deleteMisplacedBuckets deletes the buckets named name stored outside
// places (all of them when the bucket no longer exists).
func (t *term) deleteMisplacedBuckets(ctx context.Context, name string, places []string, exists bool) error {
	objs, err := t.bucketInformer.GetIndexer().ByIndex(indexBucketName, name)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		b := obj.(*quotav1alpha1.AllowanceBucket)
		if exists && slices.Contains(places, b.Namespace) {
			continue
		}
		err := t.r.client.Delete(ctx, b, client.Preconditions{UID: &b.UID})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting bucket %s/%s, now placed in %s: %w", b.Namespace, b.Name, strings.Join(places, ", "), err)
		}
	}
	return nil
}

// indexBucketName indexes buckets by name: a bucket's name is unique to its
// consumer, resource type and dimensions, whatever its namespace.
const indexBucketName = "bucketName"

func bucketNameIndex(obj any) ([]string, error) {
	b, ok := obj.(*quotav1alpha1.AllowanceBucket)
	if !ok {
		return nil, nil
	}
	return []string{b.Name}, nil
}

// bucketNamespaceReady returns nil when the bucket namespace ns exists and
// is not being deleted. The engine never creates a bucket namespace: an
// organization's namespace is its tenancy controller's, and any other is its
// owner's (docs/conditions.md, "Where buckets live"). Until then the bucket
// is retried with backoff; the error is not a NotFound, which would drop it.
func (t *term) bucketNamespaceReady(ctx context.Context, ns string) error {
	t.nsMu.Lock()
	known := t.namespaces[ns]
	t.nsMu.Unlock()
	if known {
		return nil
	}
	got, err := t.r.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("bucket namespace %s does not exist yet; the bucket is written once it does", ns)
	case err != nil:
		return fmt.Errorf("reading bucket namespace %s: %v", ns, err)
	case got.DeletionTimestamp != nil || got.Status.Phase == corev1.NamespaceTerminating:
		return fmt.Errorf("bucket namespace %s is being deleted; the bucket is written once it exists again", ns)
	}
	t.nsMu.Lock()
	t.namespaces[ns] = true
	t.nsMu.Unlock()
	return nil
}

func (t *term) forgetNamespace(ns string) {
	t.nsMu.Lock()
	delete(t.namespaces, ns)
	t.nsMu.Unlock()
}

var labelUnsafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// labelValue makes s a valid label value: allowed characters, at most 63.
func labelValue(s string) string {
	s = labelUnsafe.ReplaceAllString(s, "_")
	if len(s) > 63 {
		s = s[:63]
	}
	return strings.Trim(s, "._-")
}

func bucketLabels(id quota.BucketID) map[string]string {
	return map[string]string{
		LabelConsumerKind: labelValue(id.Consumer.Kind),
		LabelConsumerName: labelValue(id.Consumer.Name),
		LabelResourceType: labelValue(id.ResourceType),
		LabelManagedBy:    managedByQuotaplane,
	}
}

func bucketStatus(stored *quotav1alpha1.AllowanceBucket, st quota.BucketStatus) quotav1alpha1.AllowanceBucketStatus {
	now := metav1.Now()
	out := quotav1alpha1.AllowanceBucketStatus{
		ObservedGeneration: stored.Generation,
		Limit:              st.Limit,
		Allocated:          st.Allocated,
		Available:          st.Available(),
		ClaimCount:         st.Claims,
		GrantCount:         int32(len(st.Grants)),
		LastReconciliation: &now,
		Conditions:         append([]metav1.Condition(nil), stored.Status.Conditions...),
	}
	for _, g := range st.Grants {
		out.ContributingGrantRefs = append(out.ContributingGrantRefs, quotav1alpha1.ContributingGrantRef{Name: g.Name, Namespace: g.Namespace, Amount: g.Amount})
	}
	cond := metav1.Condition{Type: quotav1alpha1.BucketConditionOverLimit, Status: metav1.ConditionFalse, Reason: "WithinLimit",
		Message: fmt.Sprintf("%d of %d allocated", st.Allocated, st.Limit), ObservedGeneration: stored.Generation}
	if st.OverLimit() {
		cond.Status, cond.Reason = metav1.ConditionTrue, "LimitBelowAllocation"
		cond.Message = fmt.Sprintf("%d allocated exceeds the limit %d (a grant was lowered or removed); nothing is revoked, and new claims are denied until allocation falls below the limit", st.Allocated, st.Limit)
	}
	meta.SetStatusCondition(&out.Conditions, cond)
	return out
}

func bucketStatusEqual(a, b quotav1alpha1.AllowanceBucketStatus) bool {
	if a.ObservedGeneration != b.ObservedGeneration || a.Limit != b.Limit || a.Allocated != b.Allocated || a.Available != b.Available ||
		a.ClaimCount != b.ClaimCount || a.GrantCount != b.GrantCount || len(a.ContributingGrantRefs) != len(b.ContributingGrantRefs) || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.ContributingGrantRefs {
		if a.ContributingGrantRefs[i] != b.ContributingGrantRefs[i] {
			return false
		}
	}
	for i := range a.Conditions {
		if a.Conditions[i].Status != b.Conditions[i].Status || a.Conditions[i].Message != b.Conditions[i].Message {
			return false
		}
	}
	return true
}
