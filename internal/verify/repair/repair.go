package repair

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/verify"
)

// Options are verify's, and how long to wait for the engine to carry out
// what it is asked.
type Options struct {
	verify.Options
	// Timeout bounds the wait for the engine.
	Timeout time.Duration
}

// Action is one repair carried out.
type Action struct {
	// Discrepancies are the IDs of what it repairs.
	Discrepancies []string
	// Did says what was done.
	Did string
	// Err is set when it could not be done.
	Err error
}

// Run audits, repairs what the audit found, waits for the engine to carry
// out what it was asked, and audits again. It prints each action to out and
// returns the second audit (the first when nothing was found).
func Run(ctx context.Context, o Options, out io.Writer) (*verify.Report, []Action, error) {
	first, err := verify.Run(ctx, o.Options)
	if err != nil {
		return nil, nil, err
	}
	if len(first.Discrepancies) == 0 {
		fmt.Fprintln(out, "Nothing to repair.")
		return first, nil, nil
	}
	r, err := connect(o)
	if err != nil {
		return nil, nil, err
	}
	actions := r.plan(first)
	deadline, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	for i := range actions {
		actions[i].Err = actions[i].do(deadline)
	}
	var done []Action
	for i := range actions {
		a := &actions[i]
		if a.Err == nil && a.wait != nil {
			var said string
			said, a.Err = a.wait(deadline)
			a.Did += said
		}
		if a.Err != nil {
			fmt.Fprintf(out, "NOT DONE: %s: %v\n", a.Did, a.Err)
		} else {
			fmt.Fprintf(out, "%s\n", a.Did)
		}
		done = append(done, a.Action)
	}
	// The engine's writes land over a moment: audit until nothing is left,
	// or what is left is the same two readings in a row (damage the repairs
	// do not reach, or the time is up).
	again := o.Options
	again.RecheckAfter = 0
	var second, previous *verify.Report
	err = wait.PollUntilContextCancel(deadline, time.Second, true, func(ctx context.Context) (bool, error) {
		rep, err := verify.Run(ctx, again)
		if err != nil {
			return false, nil
		}
		previous, second = second, rep
		return len(rep.Discrepancies) == 0 || (previous != nil && sameIDs(previous, rep)), nil
	})
	if second == nil {
		return nil, done, fmt.Errorf("auditing after the repair: %w", err)
	}
	if len(second.Discrepancies) > 0 && o.RecheckAfter > 0 {
		// What is left is read again, as a plain audit would.
		if rep, err := verify.Run(ctx, o.Options); err == nil {
			second = rep
		}
	}
	return second, done, nil
}

// sameIDs reports whether two audits found the same discrepancies.
func sameIDs(a, b *verify.Report) bool {
	if len(a.Discrepancies) != len(b.Discrepancies) {
		return false
	}
	for _, d := range b.Discrepancies {
		if !slices.ContainsFunc(a.Discrepancies, func(x verify.Discrepancy) bool { return x.ID == d.ID }) {
			return false
		}
	}
	return true
}

// repairer holds the clients of one repair.
type repairer struct {
	o     Options
	kube  kubernetes.Interface
	quota client.Client
	nonce string
}

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := quotav1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

func connect(o Options) (*repairer, error) {
	cfg, err := o.RESTConfig()
	if err != nil {
		return nil, err
	}
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "quotaplane-verify-repair")
	r := &repairer{o: o, nonce: strconv.FormatInt(time.Now().UnixNano(), 36)}
	if r.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	jsonCfg := rest.CopyConfig(cfg)
	jsonCfg.ContentType, jsonCfg.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
	if r.quota, err = client.New(jsonCfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	return r, nil
}

// plannedAction is an Action with how to do it and how to wait for it.
type plannedAction struct {
	Action
	do func(context.Context) error
	// wait returns what the engine says it did, if anything.
	wait func(context.Context) (string, error)
}

// plan groups the discrepancies by what repairs them: one charge request
// per policy, one delete per orphan claim or stale bucket, one new term for
// everything else that a new term repairs.
func (r *repairer) plan(rep *verify.Report) []plannedAction {
	var out []plannedAction
	policies := map[string]int{}
	var newTerm []string
	for _, d := range rep.Discrepancies {
		switch {
		case d.Check == verify.CheckUnclaimedObject && d.Target != nil:
			if i, ok := policies[d.Target.Name]; ok {
				out[i].Discrepancies = append(out[i].Discrepancies, d.ID)
				continue
			}
			policies[d.Target.Name] = len(out)
			out = append(out, r.chargeExisting(d))
		case d.Check == verify.CheckOrphanClaim && d.Target != nil:
			out = append(out, r.deleteClaim(d))
		case d.Check == verify.CheckBucketStale && d.Target != nil:
			out = append(out, r.deleteBucket(d))
		case d.Check == verify.CheckBucketMismatch, d.Check == verify.CheckBucketMissing, d.Check == verify.CheckInFlightOverdue:
			newTerm = append(newTerm, d.ID)
		case d.Check == verify.CheckConsumerMissing, d.Check == verify.CheckUnevaluableObject:
			// No write of quotaplane's repairs it, and a new term would not.
			out = append(out, plannedAction{Action: Action{Discrepancies: []string{d.ID},
				Did: fmt.Sprintf("leave %s: %s", d.ID, d.Repair)},
				do: func(context.Context) error { return fmt.Errorf("only a person can repair it") }})
		default:
			out = append(out, plannedAction{Action: Action{Discrepancies: []string{d.ID},
				Did: fmt.Sprintf("repair %s automatically: it is not repaired through the engine; by hand: %s", d.ID, d.Repair)},
				do: func(context.Context) error { return fmt.Errorf("not repaired") }})
		}
	}
	if len(newTerm) > 0 {
		out = append(out, r.rebuild(newTerm))
	}
	return out
}

// chargeExisting asks the engine to charge the governed objects of a policy
// that hold no claim of it.
func (r *repairer) chargeExisting(d verify.Discrepancy) plannedAction {
	name := d.Target.Name
	a := plannedAction{Action: Action{Discrepancies: []string{d.ID},
		Did: fmt.Sprintf("asked the engine to charge the existing objects of ClaimCreationPolicy %s that hold no claim of it (annotation %s=%s)", name, quotav1alpha1.AnnotationChargeExisting, r.nonce)}}
	a.do = func(ctx context.Context) error {
		p := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, quotav1alpha1.AnnotationChargeExisting, r.nonce)
		return r.quota.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(patch)))
	}
	a.wait = func(ctx context.Context) (string, error) {
		var st *quotav1alpha1.ExistingObjectsStatus
		err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			p := &quotav1alpha1.ClaimCreationPolicy{}
			if err := r.quota.Get(ctx, client.ObjectKey{Name: name}, p); err != nil {
				return false, nil
			}
			st = p.Status.ExistingObjects
			return st != nil && st.Request == r.nonce, nil
		})
		if err != nil {
			return "", fmt.Errorf("ClaimCreationPolicy %s: status.existingObjects does not answer request %s yet (is an engine replica leading?)", name, r.nonce)
		}
		return "; the engine says: " + st.Message, nil
	}
	return a
}

// deleteClaim deletes an orphan claim, by UID: the engine releases it.
func (r *repairer) deleteClaim(d verify.Discrepancy) plannedAction {
	t := d.Target
	a := plannedAction{Action: Action{Discrepancies: []string{d.ID},
		Did: fmt.Sprintf("deleted the orphan ResourceClaim %s/%s (uid %s); the engine releases what it held", t.Namespace, t.Name, t.UID)}}
	a.do = func(ctx context.Context) error {
		c := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: t.Name}}
		err := r.quota.Delete(ctx, c, client.Preconditions{UID: ptr(types.UID(t.UID))})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil // gone already, or another claim of that name now
		}
		return err
	}
	return a
}

// deleteBucket deletes a bucket no grant or claim gives.
func (r *repairer) deleteBucket(d verify.Discrepancy) plannedAction {
	t := d.Target
	a := plannedAction{Action: Action{Discrepancies: []string{d.ID},
		Did: fmt.Sprintf("deleted the stale AllowanceBucket %s/%s", t.Namespace, t.Name)}}
	a.do = func(ctx context.Context) error {
		b := &quotav1alpha1.AllowanceBucket{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: t.Name}}
		var pre client.Preconditions
		if t.UID != "" {
			pre.UID = ptr(types.UID(t.UID))
		}
		err := r.quota.Delete(ctx, b, pre)
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	}
	return a
}

// rebuild asks for a new engine term and waits until it says it rebuilt.
func (r *repairer) rebuild(ids []string) plannedAction {
	ns := r.o.SystemNamespace
	a := plannedAction{Action: Action{Discrepancies: ids,
		Did: fmt.Sprintf("asked the engine for a new term, which rebuilds every bucket from storage and settles every grant in flight (ConfigMap %s/%s, request %s)", ns, formats.RebuildName, r.nonce)}}
	cms := func() interface {
		Get(context.Context, string, metav1.GetOptions) (*corev1.ConfigMap, error)
		Create(context.Context, *corev1.ConfigMap, metav1.CreateOptions) (*corev1.ConfigMap, error)
		Update(context.Context, *corev1.ConfigMap, metav1.UpdateOptions) (*corev1.ConfigMap, error)
	} {
		return r.kube.CoreV1().ConfigMaps(ns)
	}
	a.do = func(ctx context.Context) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cm, err := cms().Get(ctx, formats.RebuildName, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				_, err = cms().Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: formats.RebuildName},
					Data: map[string]string{formats.RebuildRequestedKey: r.nonce}}, metav1.CreateOptions{})
				return err
			}
			if err != nil {
				return err
			}
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[formats.RebuildRequestedKey] = r.nonce
			_, err = cms().Update(ctx, cm, metav1.UpdateOptions{})
			return err
		})
	}
	a.wait = func(ctx context.Context) (string, error) {
		err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			cm, err := cms().Get(ctx, formats.RebuildName, metav1.GetOptions{})
			return err == nil && cm.Data[formats.RebuildDoneKey] == r.nonce, nil
		})
		if err != nil {
			return "", fmt.Errorf("no engine term has rebuilt for request %s yet (is an engine replica leading? its Lease is %s/%s)", r.nonce, ns, formats.LeaseName)
		}
		return "; a new term rebuilt", nil
	}
	return a
}

func ptr[T any](v T) *T { return &v }
