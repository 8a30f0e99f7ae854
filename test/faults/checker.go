package faults

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// State is what is stored once the load ended.
type State struct {
	// Stored are the Secrets, by name, and their UIDs.
	Stored map[string]string
	// Project is the project each stored Secret is charged to, by name.
	Project map[string]string
	// Granted counts the granted claims of each object UID.
	Granted map[string]int
	// GrantedClaims counts every granted claim.
	GrantedClaims int
	// Allocated and Limit are each level's bucket's, by bucket name.
	Allocated, Limit map[string]int64
}

// Read reads the Secrets and claims of the levels' namespace and every
// level's bucket.
func Read(ctx context.Context, c client.Client, lv *Levels) (State, error) {
	st := State{Stored: map[string]string{}, Project: map[string]string{}, Granted: map[string]int{}, Allocated: map[string]int64{}, Limit: map[string]int64{}}
	secrets := &corev1.SecretList{}
	if err := c.List(ctx, secrets, client.InNamespace(lv.NS)); err != nil {
		return st, err
	}
	for _, s := range secrets.Items {
		st.Stored[s.Name] = string(s.UID)
		st.Project[s.Name] = s.Labels[projectLabel]
	}
	claims := &quotav1alpha1.ResourceClaimList{}
	if err := c.List(ctx, claims, client.InNamespace(lv.NS)); err != nil {
		return st, err
	}
	for _, cl := range claims.Items {
		if meta.IsStatusConditionTrue(cl.Status.Conditions, quotav1alpha1.ClaimConditionGranted) {
			st.Granted[cl.Annotations[quotav1alpha1.AnnotationResourceUID]]++
			st.GrantedClaims++
		}
	}
	for name := range lv.Limits {
		b := &quotav1alpha1.AllowanceBucket{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: lv.BucketNS, Name: name}, b); err != nil {
			return st, err
		}
		st.Allocated[name], st.Limit[name] = b.Status.Allocated, b.Status.Limit
	}
	return st, nil
}

// storedAt counts the stored objects each level is charged for, by bucket
// name: the organization all of them, a project those labelled with it.
func (st State) storedAt(lv *Levels) map[string]int64 {
	n := map[string]int64{lv.OrgBucket: int64(len(st.Stored))}
	for _, p := range st.Project {
		if b, ok := lv.Of[p]; ok {
			n[b]++
		}
	}
	return n
}

// settled reports whether every stored object holds exactly one granted
// claim, no other claim is granted, and every level's bucket counts exactly
// the stored objects charged to it.
func (st State) settled(lv *Levels) bool {
	for _, uid := range st.Stored {
		if st.Granted[uid] != 1 {
			return false
		}
	}
	at := st.storedAt(lv)
	for b := range lv.Limits {
		if st.Allocated[b] != at[b] {
			return false
		}
	}
	return st.GrantedClaims == len(st.Stored)
}

// Describe is the state for a report: stored, granted claims, and each
// level's allocated/limit.
func (st State) Describe(lv *Levels) string {
	at := st.storedAt(lv)
	s := fmt.Sprintf("%d stored, %d granted claims", len(st.Stored), st.GrantedClaims)
	for _, b := range lv.order() {
		s += fmt.Sprintf("; %s: %d stored, bucket %d/%d", lv.Names[b], at[b], st.Allocated[b], st.Limit[b])
	}
	return s
}

// Settle waits, up to within, until the stored state is settled (grants of
// requests whose end is unclear are held up to the hold period), and
// returns the last state read.
func Settle(ctx context.Context, c client.Client, lv *Levels, within time.Duration) (State, time.Duration) {
	start := time.Now()
	var st State
	_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, within, true, func(ctx context.Context) (bool, error) {
		var err error
		st, err = Read(ctx, c, lv)
		return err == nil && st.settled(lv), nil
	})
	return st, time.Since(start)
}

// Check proves the history against the final state: at every level,
// stored ≤ limit and the level's bucket counts exactly the stored objects
// charged to it; every stored governed object has exactly one granted
// claim; no grant is held for an object that does not exist; no
// acknowledged create is lost; no refused create is stored.
func Check(ops []Op, st State, lv *Levels) []string {
	var bad []string
	at := st.storedAt(lv)
	for _, b := range lv.order() {
		limit := lv.Limits[b]
		if at[b] > limit {
			bad = append(bad, fmt.Sprintf("%s: %d objects stored for a limit of %d", lv.Names[b], at[b], limit))
		}
		if st.Allocated[b] != at[b] || st.Allocated[b] > limit || st.Limit[b] != limit {
			bad = append(bad, fmt.Sprintf("%s: the bucket counts %d/%d for %d stored objects (limit %d)", lv.Names[b], st.Allocated[b], st.Limit[b], at[b], limit))
		}
	}
	for name, p := range st.Project {
		if _, ok := lv.Of[p]; !ok {
			bad = append(bad, fmt.Sprintf("stored object %s names project %q, none of the levels'", name, p))
		}
	}
	for name, uid := range st.Stored {
		if n := st.Granted[uid]; n != 1 {
			bad = append(bad, fmt.Sprintf("stored object %s holds %d granted claims, want exactly 1", name, n))
		}
	}
	if st.GrantedClaims != len(st.Stored) {
		bad = append(bad, fmt.Sprintf("%d granted claims for %d stored objects: grants held for objects that do not exist", st.GrantedClaims, len(st.Stored)))
	}
	created, refused, mayBeGone := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, op := range ops {
		switch {
		case op.Kind == "create" && op.Result == OK:
			created[op.Name] = true
		case op.Kind == "create" && op.Result == Refused && op.Why != "conflict":
			refused[op.Name] = true
		case op.Kind == "delete" && op.Result != Refused:
			mayBeGone[op.Name] = true
		}
	}
	for name := range created {
		if _, ok := st.Stored[name]; !ok && !mayBeGone[name] {
			bad = append(bad, fmt.Sprintf("acknowledged create of %s was lost", name))
		}
	}
	for name := range refused {
		if _, ok := st.Stored[name]; ok {
			bad = append(bad, fmt.Sprintf("refused create of %s was stored", name))
		}
	}
	return bad
}
