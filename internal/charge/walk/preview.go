package walk

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// ReasonQuotaExceeded counts the objects that would not fit.
const ReasonQuotaExceeded = "QuotaExceeded"

// Previewing is what a preview reads besides the objects.
type Previewing struct {
	// Held reports whether the object of uid holds a claim of the policy
	// already (charged by an enforced generation): coming into force
	// leaves it as it is. Nil: none does.
	Held func(uid string) bool
	// Bucket reads a bucket's limit and allocation now.
	Bucket func(ctx context.Context, id quota.BucketID) (quota.BucketNow, error)
}

// evalKey groups evaluation errors: the same field failing the same way.
type evalKey struct{ field, message string }

// Preview is what version v would do, if it came into force now, to the
// objects that exist: which it would charge and to which buckets, which of
// those would not fit if created now in creation order (coming into force
// charges them anyway), and which it cannot evaluate or charge. It charges
// nothing. The summary's lists are bounded as a policy's status.impact is;
// Consumers lists every bucket charged.
func (w *Walker) Preview(ctx context.Context, v Version, r Previewing) (*quotav1alpha1.PolicyPreviewResult, error) {
	compiled, err := Compile(v)
	if err != nil {
		return nil, err
	}
	out := &quotav1alpha1.PolicyPreviewResult{Summary: quotav1alpha1.PolicyImpact{Generation: v.Generation}}
	sum := &out.Summary
	k, err := w.KindOf(ctx, v.Trigger.Resource)
	if err != nil {
		return nil, err
	}
	if k.GVR.Empty() {
		sum.Message = fmt.Sprintf("kind %s (apiVersion %s) is not served: no object of it exists", v.Trigger.Resource.Kind, v.Trigger.Resource.APIVersion)
		return out, nil
	}
	sources, unexamined, err := w.Sources(ctx, k.GVR.GroupResource())
	if err != nil {
		return nil, err
	}
	reasons := map[string]int64{}
	evals := map[evalKey]*quotav1alpha1.EvaluationError{}
	var objects []quota.ImpactObject
	open := map[string]error{}
	for _, src := range sources {
		err := src.Each(ctx, k.GVR, func(obj *unstructured.Unstructured) error {
			sum.Objects++
			claim, refused := w.ClaimFor(ctx, v, compiled, k, src.Plane, obj, open)
			name := ObjectName(k.GVK.Kind, obj.GetNamespace(), obj.GetName()) + src.Where()
			switch {
			case refused != nil:
				sum.Matched++
				sum.FailedToEvaluate++
				reasons[refused.Reason]++
				if len(out.NotCharged) < quotav1alpha1.MaxPreviewObjects {
					out.NotCharged = append(out.NotCharged, name+": "+refused.Why)
				}
				if e := refused.Eval; e != nil {
					key := evalKey{e.Field, e.Err.Error()}
					if x := evals[key]; x != nil {
						x.Count++
					} else {
						evals[key] = &quotav1alpha1.EvaluationError{FieldRef: e.Field, Message: truncate(e.Err.Error(), 1000), Example: name, Count: 1}
					}
				}
			case claim == nil:
			case r.Held != nil && r.Held(string(obj.GetUID())):
				sum.Matched++
				sum.AlreadyCharged++
			default:
				sum.Matched++
				c := convert.Claim(claim)
				o := quota.ImpactObject{Name: name, Created: obj.GetCreationTimestamp().Time}
				for _, rq := range c.Requests {
					o.Charges = append(o.Charges, quota.ImpactCharge{Bucket: quota.BucketID{Consumer: c.Consumer, ResourceType: rq.ResourceType, Dims: rq.Dims.Key()}, Amount: rq.Amount})
				}
				objects = append(objects, o)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	// Every bucket's numbers now, read once each, before deciding.
	now := map[quota.BucketID]quota.BucketNow{}
	for _, o := range objects {
		for _, c := range o.Charges {
			if _, ok := now[c.Bucket]; ok {
				continue
			}
			n, err := r.Bucket(ctx, c.Bucket)
			if err != nil {
				return nil, err
			}
			now[c.Bucket] = n
		}
	}
	res := quota.Impact(objects, func(id quota.BucketID) quota.BucketNow { return now[id] }, quotav1alpha1.MaxPreviewObjects)
	sum.WouldCharge, sum.WouldRefuse = res.Fits, res.Refused
	if res.Refused > 0 {
		reasons[ReasonQuotaExceeded] = res.Refused
	}
	out.Refused = res.RefusedObjects
	for _, b := range res.Buckets {
		out.Consumers = append(out.Consumers, consumerImpact(b))
	}
	over, total := res.OverLimit(quotav1alpha1.MaxImpactConsumers)
	sum.ConsumersOverLimit = total
	for _, b := range over {
		sum.OverLimit = append(sum.OverLimit, consumerImpact(b))
	}
	for reason, n := range reasons {
		sum.Reasons = append(sum.Reasons, quotav1alpha1.ImpactReason{Reason: reason, Count: n})
	}
	slices.SortFunc(sum.Reasons, func(a, b quotav1alpha1.ImpactReason) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Reason, b.Reason))
	})
	for _, e := range evals {
		sum.EvaluationErrors = append(sum.EvaluationErrors, *e)
	}
	slices.SortFunc(sum.EvaluationErrors, func(a, b quotav1alpha1.EvaluationError) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.FieldRef, b.FieldRef), cmp.Compare(a.Message, b.Message))
	})
	if len(sum.EvaluationErrors) > quotav1alpha1.MaxImpactErrors {
		sum.EvaluationErrors = sum.EvaluationErrors[:quotav1alpha1.MaxImpactErrors]
	}
	sum.Message = summary(k.GVK.Kind, sum, unexamined)
	now2 := metav1.Now()
	sum.CompletionTime = &now2
	return out, nil
}

func consumerImpact(b quota.BucketImpact) quotav1alpha1.ConsumerImpact {
	return quotav1alpha1.ConsumerImpact{ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: b.Bucket.Consumer.APIGroup, Kind: b.Bucket.Consumer.Kind,
		Namespace: b.Bucket.Consumer.Namespace, Name: b.Bucket.Consumer.Name}, ResourceType: b.Bucket.ResourceType, Dimensions: b.Bucket.Dims,
		Limit: b.Limit, Allocated: b.Allocated, AllocatedAfter: b.AllocatedAfter, Objects: b.Objects, WouldRefuse: b.WouldRefuse}
}

// summary says what a preview found, for a person.
func summary(kind string, s *quotav1alpha1.PolicyImpact, unexamined []string) string {
	msg := fmt.Sprintf("%d existing %s objects examined, %d matched: %d would be charged within their limits, %d would not fit (charged anyway, over the limit, if the policy came into force; refused if created now), %d cannot be evaluated or charged",
		s.Objects, kind, s.Matched, s.WouldCharge, s.WouldRefuse, s.FailedToEvaluate)
	if s.AlreadyCharged > 0 {
		msg += fmt.Sprintf(", %d already hold a claim of this policy and are left as they are", s.AlreadyCharged)
	}
	if s.ConsumersOverLimit > 0 {
		msg += fmt.Sprintf("; it would put %d buckets over their limits", s.ConsumersOverLimit)
	}
	if len(s.EvaluationErrors) > 0 {
		e := s.EvaluationErrors[0]
		msg += fmt.Sprintf("; %s fails for %d objects, for example %s: %s — fix the policy, or give the objects what it reads", e.FieldRef, e.Count, e.Example, e.Message)
	}
	if len(unexamined) > 0 {
		msg += "; control planes not examined, as they are not served: " + strings.Join(unexamined, "; ")
	}
	return truncate(msg, 4000)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Reading reads what a preview needs besides the objects through the API:
// the claims of the policy named (their objects are left as they are when
// an edit comes into force) and every AllowanceBucket's limit and
// allocation, each listed once.
func (w *Walker) Reading(ctx context.Context, policyName string) (Previewing, error) {
	held := map[string]bool{}
	if policyName != "" {
		err := eachListed(ctx, w.Dynamic.Resource(quotav1alpha1.SchemeGroupVersion.WithResource("resourceclaims")),
			metav1.ListOptions{LabelSelector: quotav1alpha1.LabelPolicy + "=" + policyName}, func(u *unstructured.Unstructured) {
				if uid := u.GetAnnotations()[quotav1alpha1.AnnotationResourceUID]; uid != "" {
					held[uid] = true
				}
			})
		if err != nil {
			return Previewing{}, fmt.Errorf("listing the claims of ClaimCreationPolicy %s: %w", policyName, err)
		}
	}
	buckets := map[quota.BucketID]quota.BucketNow{}
	err := eachListed(ctx, w.Dynamic.Resource(quotav1alpha1.SchemeGroupVersion.WithResource("allowancebuckets")), metav1.ListOptions{}, func(u *unstructured.Unstructured) {
		b := &quotav1alpha1.AllowanceBucket{}
		if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, b) != nil {
			return
		}
		buckets[convert.BucketID(b)] = quota.BucketNow{Limit: b.Status.Limit, Allocated: b.Status.Allocated}
	})
	if err != nil {
		return Previewing{}, fmt.Errorf("listing the AllowanceBuckets: %w", err)
	}
	return Previewing{
		Held:   func(uid string) bool { return held[uid] },
		Bucket: func(_ context.Context, id quota.BucketID) (quota.BucketNow, error) { return buckets[id], nil },
	}, nil
}

// eachListed calls do for every object of a list, page by page.
func eachListed(ctx context.Context, r dynamic.NamespaceableResourceInterface, opts metav1.ListOptions, do func(*unstructured.Unstructured)) error {
	opts.Limit = pageSize
	for {
		list, err := r.List(ctx, opts)
		if err != nil {
			return err
		}
		for i := range list.Items {
			do(&list.Items[i])
		}
		if list.GetContinue() == "" {
			return nil
		}
		opts.Continue = list.GetContinue()
	}
}
