package fence

import (
	"context"
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// Replica drives one replica's ledger and journal directly, as a leader
// would, for the fencing tests.
type Replica struct {
	l *Ledger
	j *Journal
}

func NewReplica(kube kubernetes.Interface, s *Storage, namespace, holder string) *Replica {
	l := NewLedger(kube, namespace, holder, s != nil)
	j, err := NewJournal(s, l)
	if err != nil {
		panic(err)
	}
	return &Replica{l: l, j: j}
}

// Stamp takes leadership of the ledger.
func (r *Replica) Stamp(ctx context.Context) error {
	_, err := r.l.Stamp(ctx)
	return err
}

// Grant records a grant made at admission for the claim ns/name.
func (r *Replica) Grant(ctx context.Context, ns, name string) error {
	p := &formats.PendingClaim{Namespace: ns, Name: name, Created: metav1.Now()}
	return r.j.Write(ctx, &Ops{Grants: []*formats.PendingClaim{p}}, map[string]error{})
}

// WriteClaim writes c as admission's claims are written, replacing its
// grant; it reports whether a claim of that name existed.
func (r *Replica) WriteClaim(ctx context.Context, c *quotav1alpha1.ResourceClaim) (existed bool, err error) {
	c = c.DeepCopy()
	c.UID, c.CreationTimestamp, c.Generation = uuid.NewUUID(), metav1.Now(), 1
	exists := map[string]error{}
	err = r.j.Write(ctx, &Ops{Creates: []*quotav1alpha1.ResourceClaim{c}}, exists)
	return len(exists) > 0, err
}

// Pending lists the grants recorded and not yet written as claims.
func (r *Replica) Pending(ctx context.Context) ([]string, error) {
	ps, err := r.j.Pending(ctx)
	var out []string
	for _, p := range ps {
		out = append(out, p.Key())
	}
	return out, err
}

// IsDeposed reports whether err says another replica took the ledger over.
func IsDeposed(err error) bool { return errors.Is(err, ErrDeposed) }

// Record writes the ledger's in-flight grants, as a leader does after deciding.
func (r *Replica) Record(ctx context.Context) error {
	return r.l.Record(ctx, formats.LedgerState{Inflight: map[string]string{}})
}

// WriteClaimAsIs writes c exactly as given (uid, creation time, generation
// included), as admission's claims are written.
func (r *Replica) WriteClaimAsIs(ctx context.Context, c *quotav1alpha1.ResourceClaim) error {
	exists := map[string]error{}
	if err := r.j.Write(ctx, &Ops{Creates: []*quotav1alpha1.ResourceClaim{c}}, exists); err != nil {
		return err
	}
	if len(exists) > 0 {
		return errors.New("a claim of that name exists")
	}
	return nil
}

// WriteGrantsRaw records grants for the claims ns/names in one journal
// write, as given (duplicates included), and reports whether an error it
// returns is one the committer answers and goes past instead of retrying.
func (r *Replica) WriteGrantsRaw(ctx context.Context, ns string, names ...string) (err error, permanent bool) {
	var ps []*formats.PendingClaim
	for _, n := range names {
		ps = append(ps, &formats.PendingClaim{Namespace: ns, Name: n, Created: metav1.Now()})
	}
	err = r.j.Write(ctx, &Ops{Grants: ps}, map[string]error{})
	return err, IsPermanent(err)
}

// HoldBudget records a budget hold for the grant ns/name, as admission does.
func (r *Replica) HoldBudget(ctx context.Context, ns, name string) error {
	org := quota.ConsumerID{APIGroup: quota.OrganizationGroup, Kind: "Organization", Name: "acme"}
	return r.j.RecordBudgetHold(ctx, formats.NewBudgetHold(quota.Grant{UID: string(uuid.NewUUID()), Generation: 1, Namespace: ns, Name: name, Budget: &org,
		Allowances: []quota.Allowance{{ResourceType: "example.com/widgets", Buckets: []quota.GrantBucket{{Amount: 1}}}}}))
}

// BudgetHolds lists the budget holds recorded, by grant namespace/name.
func (r *Replica) BudgetHolds(ctx context.Context) ([]string, error) {
	hs, err := r.j.BudgetHolds(ctx)
	var out []string
	for _, h := range hs {
		out = append(out, h.Key())
	}
	return out, err
}

// WriteBatch writes, as one committer batch, grants for the claims ns/grants,
// releases of the pending keys releases and the claims creates (written as
// given); it returns the creates and grants that found their name taken.
func (r *Replica) WriteBatch(ctx context.Context, ns string, grants, releases []string, creates []*quotav1alpha1.ResourceClaim) (map[string]error, error) {
	ops := &Ops{Releases: releases, Creates: creates}
	for _, n := range grants {
		ops.Grants = append(ops.Grants, &formats.PendingClaim{Namespace: ns, Name: n, Created: metav1.Now()})
	}
	exists := map[string]error{}
	return exists, r.j.Write(ctx, ops, exists)
}

// PendingKey is the etcd key of the grant of the claim ns/name.
func (r *Replica) PendingKey(ns, name string) string { return r.j.pendingKey(formats.Key(ns, name)) }

// ClaimKey is the etcd key of the claim ns/name.
func (r *Replica) ClaimKey(ns, name string) string { return r.j.claimKey(ns, name) }
