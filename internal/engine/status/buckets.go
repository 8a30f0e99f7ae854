package status

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// BucketWriter writes each bucket the accounts have as an AllowanceBucket in
// the namespace Placement chooses (and, for a group, a projected copy in each
// member's namespace), deletes stored buckets that no longer exist or moved,
// and puts back a bucket object someone else changed. Queued by bucket ID.
type BucketWriter struct {
	// Bucket is the accounts' state of a bucket, whether it exists, and for
	// a group's bucket the group's members.
	Bucket func(quota.BucketID) (quota.BucketStatus, bool, []quota.ConsumerID)
	// Buckets is the AllowanceBucket informer, indexed by IndexBucketName.
	Buckets toolscache.SharedIndexInformer
	// Registration finds the registration of a resource type (thresholds).
	Registration func(resourceType string) *quotav1alpha1.ResourceRegistration
	Client       client.Client
	Placement    *Placement
	// Events is the recorder of threshold Events, made when first needed.
	Events func() record.EventRecorder
	// ExpiryWarning is how long before a contributing grant's expiry the
	// bucket is ExpiringSoon; Now the engine's clock (nil: time.Now).
	ExpiryWarning time.Duration
	Now           func() time.Time
	// Verified is told that the stored bucket shows st, as of at; Gone that
	// a bucket no longer exists.
	Verified func(quota.BucketID, *quotav1alpha1.AllowanceBucket, quota.BucketStatus, time.Time)
	Gone     func(quota.BucketID)
	// Forecast, when set, is a bucket's usage trend and time to exhaustion
	// from its decision history.
	Forecast func(quota.BucketID, quota.BucketStatus, time.Time) (trend, fullIn string, fullAt *metav1.Time)
}

// Reconcile makes the stored bucket id agree with the accounts.
func (w *BucketWriter) Reconcile(ctx context.Context, id quota.BucketID) error {
	st, exists, members := w.Bucket(id)
	ns, err := w.Placement.Namespace(id.Consumer)
	if err != nil {
		return err
	}
	// A group's bucket is also projected into the namespace of each of its
	// members' buckets, where their owners read it.
	places := []string{ns}
	for _, m := range members {
		mns, err := w.Placement.Namespace(m)
		if err != nil {
			return err
		}
		if !slices.Contains(places, mns) {
			places = append(places, mns)
		}
	}
	// A project's bucket is also shown in its control plane: a copy in the
	// plane's quota namespace at the root (project-<name>), once the project
	// controller made it (docs/control-planes.md).
	if c := id.Consumer; c.APIGroup == quota.OrganizationGroup && c.Kind == "Project" && c.Namespace == "" {
		pns := planes.ProjectNamespace(c.Name)
		if err := w.Placement.NamespaceReady(ctx, pns); err == nil {
			places = append(places, pns)
		} else {
			w.Placement.WaitFor(pns, id)
		}
	}
	// A Namespace's bucket is also shown in the namespace itself, where a
	// ResourceQuota user looks (kubectl get allowancebuckets -n dev).
	if c := id.Consumer; c.APIGroup == "" && c.Kind == "Namespace" && c.Name != "" && !slices.Contains(places, c.Name) {
		if err := w.Placement.NamespaceReady(ctx, c.Name); err == nil {
			places = append(places, c.Name)
		} else {
			w.Placement.WaitFor(c.Name, id)
		}
	}
	name := quota.BucketName(id)
	// A bucket stored in another namespace than its placement (a project
	// whose organization became known, a group's member that left) goes.
	if err := w.deleteMisplacedBuckets(ctx, name, places, exists); err != nil {
		return err
	}
	if !exists {
		if err := w.deleteMisplacedBuckets(ctx, quota.LegacyBucketName(id), nil, false); err != nil {
			return err
		}
		return w.deleteBucketIn(ctx, id, ns, name)
	}
	for i, p := range places {
		from := ""
		if i > 0 {
			from = ns
		}
		if err := w.writeBucketIn(ctx, id, st, p, name, from); err != nil {
			return err
		}
	}
	// A bucket written under its legacy name (before quotaplane took the
	// reference implementation's names) goes once its successor is written.
	return w.deleteMisplacedBuckets(ctx, quota.LegacyBucketName(id), nil, false)
}

// deleteBucketIn deletes the stored bucket of a bucket that no longer exists.
func (w *BucketWriter) deleteBucketIn(ctx context.Context, id quota.BucketID, ns, name string) error {
	obj, found, err := w.Buckets.GetStore().GetByKey(ns + "/" + name)
	if err != nil || !found {
		return err
	}
	w.Gone(id)
	b := obj.(*quotav1alpha1.AllowanceBucket)
	err = w.Client.Delete(ctx, b, client.Preconditions{UID: &b.UID})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// writeBucketIn writes a bucket that exists into namespace ns: its own
// place, or a copy (projected from namespace from, its own place) in a group
// member's namespace or a project's plane.
func (w *BucketWriter) writeBucketIn(ctx context.Context, id quota.BucketID, st quota.BucketStatus, ns, name, from string) error {
	projected := from != ""
	obj, found, err := w.Buckets.GetStore().GetByKey(ns + "/" + name)
	if err != nil {
		return err
	}
	var stored *quotav1alpha1.AllowanceBucket
	if found {
		stored = obj.(*quotav1alpha1.AllowanceBucket)
	} else {
		if err := w.Placement.NamespaceReady(ctx, ns); err != nil {
			w.Placement.WaitFor(ns, id)
			return err
		}
		labels := bucketLabels(id)
		if projected {
			labels[quotav1alpha1.LabelProjectedFrom] = from
		}
		stored = &quotav1alpha1.AllowanceBucket{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: quotav1alpha1.AllowanceBucketSpec{
				ConsumerRef:  quotav1alpha1.ConsumerRef{APIGroup: id.Consumer.APIGroup, Kind: id.Consumer.Kind, Name: id.Consumer.Name, Namespace: id.Consumer.Namespace},
				ResourceType: quotav1alpha1.ResourceType(id.ResourceType),
				Dimensions:   convert.APIDimensions(st.Dims),
			},
		}
		if err := w.Client.Create(ctx, stored); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("bucket %s/%s exists but is not in the cache yet", ns, name)
			}
			if apierrors.IsNotFound(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				// The namespace went away since it was seen: wait for it
				// again. Not wrapped: a NotFound would drop the bucket.
				w.Placement.ForgetNamespace(ns)
				w.Placement.WaitFor(ns, id)
				return fmt.Errorf("creating bucket %s/%s: its namespace is gone or being deleted (%v); retrying until it exists", ns, name, err)
			}
			return fmt.Errorf("creating bucket %s/%s: %w", ns, name, err)
		}
	}
	want := bucketStatus(stored, st)
	want.Placement = quotav1alpha1.BucketPlacementOwn
	if projected {
		want.Placement = quotav1alpha1.BucketPlacementProjection
	}
	w.expiringSoon(&want, st)
	if reg := w.Registration(id.ResourceType); reg != nil {
		want.BaseUnit = reg.Spec.BaseUnit
	}
	w.setThresholdCondition(&want, stored, st)
	if w.Forecast != nil {
		want.UsageTrend, want.FullIn, want.EstimatedFullAt = w.Forecast(id, st, time.Now())
	}
	if bucketStatusEqual(stored.Status, want) {
		if !projected {
			w.Verified(id, stored, st, time.Now())
		}
		return nil
	}
	updated := stored.DeepCopy()
	updated.Status = want
	if err := w.Client.Status().Update(ctx, updated); err != nil {
		return err
	}
	if !projected {
		w.thresholdCrossed(stored, want)
		w.overLimitChanged(stored, want)
		w.expiringSoonRaised(stored, want)
		w.Verified(id, updated, st, time.Now())
	}
	return nil
}

// deleteMisplacedBuckets deletes the buckets named name stored outside
// places (all of them when the bucket no longer exists).
func (w *BucketWriter) deleteMisplacedBuckets(ctx context.Context, name string, places []string, exists bool) error {
	objs, err := w.Buckets.GetIndexer().ByIndex(IndexBucketName, name)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		b := obj.(*quotav1alpha1.AllowanceBucket)
		if exists && slices.Contains(places, b.Namespace) {
			continue
		}
		err := w.Client.Delete(ctx, b, client.Preconditions{UID: &b.UID})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting bucket %s/%s, now placed in %s: %w", b.Namespace, b.Name, strings.Join(places, ", "), err)
		}
	}
	return nil
}

// IndexBucketName indexes buckets by name: a bucket's name is unique to its
// consumer, resource type and dimensions, whatever its namespace.
const IndexBucketName = "bucketName"

// BucketNameIndex is the IndexBucketName index function.
func BucketNameIndex(obj any) ([]string, error) {
	b, ok := obj.(*quotav1alpha1.AllowanceBucket)
	if !ok {
		return nil, nil
	}
	return []string{b.Name}, nil
}

func bucketLabels(id quota.BucketID) map[string]string {
	return map[string]string{
		quotav1alpha1.LabelConsumerKind: quotav1alpha1.ConsumerLabelValue(id.Consumer.Kind),
		quotav1alpha1.LabelConsumerName: quotav1alpha1.ConsumerLabelValue(id.Consumer.Name),
		quotav1alpha1.LabelResourceType: quotav1alpha1.ConsumerLabelValue(id.ResourceType),
		quotav1alpha1.LabelManagedBy:    quotav1alpha1.ManagedByQuotaplane,
		quotav1alpha1.LabelLegacyName:   quota.LegacyBucketLabelValue(id),
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
	if pct, ok := st.UsedPercent(); ok {
		out.UsedPercent = &pct
	}
	for _, name := range slices.Sorted(maps.Keys(st.Clusters)) {
		out.Clusters = append(out.Clusters, quotav1alpha1.ClusterUsage{Name: name, Allocated: st.Clusters[name]})
	}
	for _, g := range st.Grants {
		ref := quotav1alpha1.ContributingGrantRef{Name: g.Name, Namespace: g.Namespace, Amount: g.Amount, LastObservedGeneration: g.Generation}
		if !g.ExpiresAt.IsZero() {
			ref.ExpiresAt = &metav1.Time{Time: g.ExpiresAt}
		}
		out.ContributingGrantRefs = append(out.ContributingGrantRefs, ref)
	}
	cond := metav1.Condition{Type: quotav1alpha1.BucketConditionOverLimit, Status: metav1.ConditionFalse, Reason: "WithinLimit",
		Message: fmt.Sprintf("%d of %d allocated", st.Allocated, st.Limit), ObservedGeneration: stored.Generation}
	if st.OverLimit() {
		cond.Status, cond.Reason = metav1.ConditionTrue, "LimitBelowAllocation"
		cond.Message = fmt.Sprintf("%d allocated exceeds the limit %d (a grant was lowered, removed or expired); nothing is revoked, and new claims are denied until allocation falls below the limit", st.Allocated, st.Limit)
	}
	meta.SetStatusCondition(&out.Conditions, cond)
	return out
}

func bucketStatusEqual(a, b quotav1alpha1.AllowanceBucketStatus) bool {
	if a.ObservedGeneration != b.ObservedGeneration || a.Limit != b.Limit || a.Allocated != b.Allocated || a.Available != b.Available ||
		a.ClaimCount != b.ClaimCount || a.BaseUnit != b.BaseUnit || a.GrantCount != b.GrantCount || a.Placement != b.Placement || len(a.ContributingGrantRefs) != len(b.ContributingGrantRefs) || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	if !equalPtr(a.UsedPercent, b.UsedPercent) || a.UsageTrend != b.UsageTrend || a.FullIn != b.FullIn || !a.EstimatedFullAt.Equal(b.EstimatedFullAt) || !slices.Equal(a.Clusters, b.Clusters) {
		return false
	}
	for i := range a.ContributingGrantRefs {
		x, y := a.ContributingGrantRefs[i], b.ContributingGrantRefs[i]
		if x.Name != y.Name || x.Namespace != y.Namespace || x.Amount != y.Amount || x.LastObservedGeneration != y.LastObservedGeneration || !x.ExpiresAt.Equal(y.ExpiresAt) {
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

func equalPtr[T comparable](a, b *T) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}
