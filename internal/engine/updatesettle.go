package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/policy"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// settleUpdate ends a pending update: once the update is stored, its new
// claim replaces the old ones (or they are released); an update refused
// after admission, or one that cannot be stored any more, gives its growth
// back and leaves the old claims as they are. Without a report from the
// request (a 5xx, a timeout, a restart), the stored object says which: the
// recorded policy version, evaluated on it, renders the new claim exactly
// when the update is stored.
func (t *term) settleUpdate(ctx context.Context, p *pendingClaim, out outcome, ended time.Time) error {
	k := p.key()
	gvr, ok := ParseGVR(p.Resource)
	if !ok || p.Spec.ResourceRef == nil || p.Check == nil {
		return t.release(ctx, k, "it names no object")
	}
	ref := p.Spec.ResourceRef
	switch out {
	case outcomeStored:
		return t.writeReplacement(ctx, p, gvr, p.Name)
	case outcomeRefused:
		return t.release(ctx, k, fmt.Sprintf("the update of %s %s was refused after admission", ref.Kind, ref.Name))
	}
	state, err := t.updateState(ctx, p, gvr)
	if err != nil {
		return err
	}
	switch {
	case state == updateStored:
		return t.writeReplacement(ctx, p, gvr, p.Name)
	case state == updateObjectGone:
		return t.release(ctx, k, fmt.Sprintf("%s %s was deleted", ref.Kind, ref.Name))
	case out == outcomeUnclear && time.Since(ended) >= storeGrace:
		return t.release(ctx, k, fmt.Sprintf("the update of %s %s failed and was not stored", ref.Kind, ref.Name))
	case time.Since(p.Created.Time) >= maxRequestDuration:
		return t.release(ctx, k, fmt.Sprintf("the update of %s %s was not stored within %s of admission", ref.Kind, ref.Name, maxRequestDuration))
	}
	t.materialize.AddAfter(k, recheckPeriod)
	return nil
}

type updateStateValue int

const (
	updateNotStored updateStateValue = iota
	updateStored
	updateObjectGone
)

// updateState reads the object and evaluates the recorded policy version on
// it: the update is stored when it renders the new claim (or, for a release,
// when the policy no longer applies).
func (t *term) updateState(ctx context.Context, p *pendingClaim, gvr schema.GroupVersionResource) (updateStateValue, error) {
	ref := p.Spec.ResourceRef
	obj, err := t.r.dynamic.Resource(gvr).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && string(obj.GetUID()) != p.ObjectUID) {
		return updateObjectGone, nil
	}
	if err != nil {
		return 0, err
	}
	cp := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: p.Policy, Generation: p.Check.Generation},
		Spec: quotav1alpha1.ClaimCreationPolicySpec{Trigger: p.Check.Trigger, Target: p.Check.Target}}
	compiled, err := policy.Compile(cp, policy.Options{})
	if err != nil {
		klog.FromContext(ctx).Error(err, "The policy version recorded with an update does not compile; treating the update as not stored", "claim", p.key())
		return updateNotStored, nil
	}
	applies, rendered, err := compiled.Evaluate(policy.Input{Object: obj.Object, User: p.Check.User, RequestInfo: p.Check.RequestInfo, Units: t.unitsOf})
	if err != nil {
		klog.FromContext(ctx).V(2).Info("The policy version recorded with an update cannot be evaluated on the stored object; treating the update as not stored", "claim", p.key(), "err", err)
		return updateNotStored, nil
	}
	if p.Release {
		if !applies {
			return updateStored, nil
		}
		return updateNotStored, nil
	}
	if !applies || rendered.Spec.ConsumerRef != p.Spec.ConsumerRef {
		return updateNotStored, nil
	}
	want := convert.Claim(&quotav1alpha1.ResourceClaim{Spec: p.Spec})
	got := convert.Claim(&quotav1alpha1.ResourceClaim{Spec: rendered.Spec})
	if quota.SameHolding([]quota.Claim{want}, []quota.Claim{got}) {
		return updateStored, nil
	}
	return updateNotStored, nil
}

// unitsOf is the base unit, as a quantity, that a resource type's
// registration declares (policy amounts written as quantities convert to it).
func (t *term) unitsOf(resourceType string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.eng.BaseUnitQuantity(resourceType)
}

// writeReplacement writes an update's new claim, decided and owned by its
// object, deletes the claims it replaces and the pending entry, in one fenced
// transaction; then counts the new claim instead of the old ones and the
// growth, in one step.
func (t *term) writeReplacement(ctx context.Context, p *pendingClaim, gvr schema.GroupVersionResource, name string) error {
	var c *quotav1alpha1.ResourceClaim
	if !p.Release {
		ref := p.Spec.ResourceRef
		c = &quotav1alpha1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: p.Namespace, Name: name, Labels: p.Labels, Annotations: p.annotations(),
				UID: types.UID(p.ClaimUID), CreationTimestamp: metav1.Now(), Generation: 1,
			},
			Spec: p.Spec,
		}
		if name != p.Name {
			c.Annotations[AnnotationGrantKey] = p.key()
		}
		if ref.Namespace == "" || ref.Namespace == p.Namespace {
			c.OwnerReferences = []metav1.OwnerReference{{
				APIVersion: schema.GroupVersion{Group: gvr.Group, Version: gvr.Version}.String(),
				Kind:       ref.Kind, Name: ref.Name, UID: types.UID(p.ObjectUID),
			}}
		}
		qc := convert.Claim(c)
		c.Status = claimStatus(c, qc, quota.GrantedDecision(qc), t.sealer)
	}
	err := t.journal.replace(ctx, p, c)
	var exists errClaimExists
	if errors.As(err, &exists) {
		return t.adoptReplacement(ctx, p, gvr, name)
	}
	if err != nil {
		return fmt.Errorf("writing the claims of an update (%s): %w", p.describe(), err)
	}
	decisionsTotal.WithLabelValues("granted", "Resized").Inc()
	t.mu.Lock()
	if t.pending[p.key()] == p {
		t.swapLocked(p, c)
	}
	t.mu.Unlock()
	t.kickNow()
	return nil
}

// adoptReplacement settles an update whose new claim's name is taken: by the
// claim this engine wrote (a write that failed in transit yet landed), which
// is adopted, or by another claim, and then the new claim goes under a name
// derived from it.
func (t *term) adoptReplacement(ctx context.Context, p *pendingClaim, gvr schema.GroupVersionResource, name string) error {
	stored := &quotav1alpha1.ResourceClaim{}
	if err := t.r.client.Get(ctx, clientKey(p.Namespace, name), stored); err != nil {
		return fmt.Errorf("reading claim %s/%s: %w", p.Namespace, name, err)
	}
	t.mu.Lock()
	adopted := grantKeyOf(stored) == p.key() && t.pending[p.key()] == p && t.adoptUpdateLocked(p, stored)
	t.mu.Unlock()
	if adopted {
		return nil
	}
	if name != p.Name {
		return fmt.Errorf("the claim names %s and %s/%s are both taken by other claims", p.key(), p.Namespace, name)
	}
	sum := sha256.Sum256([]byte(p.ObjectUID + "/" + p.Policy + "/" + p.Created.String()))
	return t.writeReplacement(ctx, p, gvr, truncateName(p.Name, 240)+"-"+hex.EncodeToString(sum[:5]))
}

func truncateName(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// replace writes an update's new claim c (none for a release), deletes the
// claims it replaces that are still the ones it names (same UID), and drops
// its pending entry, in one fenced transaction. errClaimExists: a claim of
// c's name exists; nothing was written.
func (j *journal) replace(ctx context.Context, p *pendingClaim, c *quotav1alpha1.ResourceClaim) error {
	for {
		ops := []clientv3.Op{clientv3.OpDelete(j.pendingKey(p.key()))}
		var conds []clientv3.Cmp
		if c != nil {
			o, cmp, err := j.createOps(c)
			if err != nil {
				return err
			}
			// createOps drops the pending key too (by c's grant key).
			ops, conds = o, []clientv3.Cmp{cmp}
		}
		for _, r := range p.Replaces {
			ck := j.claimKey(r.Namespace, r.Name)
			resp, err := j.s.Client.Get(ctx, ck)
			if err != nil {
				return fmt.Errorf("reading claim %s: %w", r.key(), err)
			}
			if len(resp.Kvs) == 0 {
				continue // deleted meanwhile
			}
			var m struct {
				Metadata struct {
					UID string `json:"uid"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(resp.Kvs[0].Value, &m); err != nil || m.Metadata.UID != r.UID {
				continue // another claim of that name: not this one's
			}
			ops = append(ops, clientv3.OpDelete(ck))
			conds = append(conds, clientv3.Compare(clientv3.ModRevision(ck), "=", resp.Kvs[0].ModRevision))
		}
		err := j.commit(ctx, ops, conds)
		if !errors.Is(err, errCompareFailed) {
			return err
		}
		if c != nil {
			resp, err := j.s.Client.Get(ctx, j.claimKey(c.Namespace, c.Name), clientv3.WithKeysOnly())
			if err != nil {
				return err
			}
			if len(resp.Kvs) > 0 {
				return errClaimExists{key: key(c.Namespace, c.Name)}
			}
		}
		// A replaced claim changed between the read and the write (its
		// status written, say): read again.
	}
}
