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
	// Granted counts the granted claims of each object UID.
	Granted map[string]int
	// GrantedClaims counts every granted claim.
	GrantedClaims int
	// Allocated and Limit are the bucket's.
	Allocated, Limit int64
}

// Read reads the state of ns and the bucket.
func Read(ctx context.Context, c client.Client, ns, bucketNS, bucket string) (State, error) {
	st := State{Stored: map[string]string{}, Granted: map[string]int{}}
	secrets := &corev1.SecretList{}
	if err := c.List(ctx, secrets, client.InNamespace(ns)); err != nil {
		return st, err
	}
	for _, s := range secrets.Items {
		st.Stored[s.Name] = string(s.UID)
	}
	claims := &quotav1alpha1.ResourceClaimList{}
	if err := c.List(ctx, claims, client.InNamespace(ns)); err != nil {
		return st, err
	}
	for _, cl := range claims.Items {
		if meta.IsStatusConditionTrue(cl.Status.Conditions, quotav1alpha1.ClaimConditionGranted) {
			st.Granted[cl.Annotations[quotav1alpha1.AnnotationResourceUID]]++
			st.GrantedClaims++
		}
	}
	b := &quotav1alpha1.AllowanceBucket{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: bucketNS, Name: bucket}, b); err != nil {
		return st, err
	}
	st.Allocated, st.Limit = b.Status.Allocated, b.Status.Limit
	return st, nil
}

// settled reports whether every stored object holds exactly one granted
// claim, no other claim is granted, and the bucket counts exactly them.
func (st State) settled() bool {
	for _, uid := range st.Stored {
		if st.Granted[uid] != 1 {
			return false
		}
	}
	return st.GrantedClaims == len(st.Stored) && st.Allocated == int64(len(st.Stored))
}

// Settle waits, up to within, until the stored state is settled (grants of
// requests whose end is unclear are held up to the hold period), and
// returns the last state read.
func Settle(ctx context.Context, c client.Client, ns, bucketNS, bucket string, within time.Duration) (State, time.Duration) {
	start := time.Now()
	var st State
	_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, within, true, func(ctx context.Context) (bool, error) {
		var err error
		st, err = Read(ctx, c, ns, bucketNS, bucket)
		return err == nil && st.settled(), nil
	})
	return st, time.Since(start)
}

// Check proves the history against the final state: stored ≤ limit; every
// stored governed object has exactly one granted claim; no grant is held
// for an object that does not exist; the bucket counts exactly the stored
// objects; no acknowledged create is lost; no refused create is stored.
func Check(ops []Op, st State, limit int64) []string {
	var bad []string
	if int64(len(st.Stored)) > limit {
		bad = append(bad, fmt.Sprintf("%d objects stored for a limit of %d", len(st.Stored), limit))
	}
	for name, uid := range st.Stored {
		if n := st.Granted[uid]; n != 1 {
			bad = append(bad, fmt.Sprintf("stored object %s holds %d granted claims, want exactly 1", name, n))
		}
	}
	if st.GrantedClaims != len(st.Stored) {
		bad = append(bad, fmt.Sprintf("%d granted claims for %d stored objects: grants held for objects that do not exist", st.GrantedClaims, len(st.Stored)))
	}
	if st.Allocated != int64(len(st.Stored)) || st.Allocated > limit {
		bad = append(bad, fmt.Sprintf("the bucket counts %d allocated for %d stored objects (limit %d)", st.Allocated, len(st.Stored), limit))
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
