package fence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/config/crd"
	"github.com/quotaplane/quotaplane/internal/engine/enginemetrics"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
)

// Storage is direct access to the etcd of the API server the engine runs in
// (quotaplane serve). Admission's grants go through it: each is one small
// key written in a transaction fenced by the ledger, and its claim is later
// written already decided and owned, in one more transaction — instead of
// three API writes per admitted create. docs/admission.md has the argument.
type Storage struct {
	Client *clientv3.Client
	// Prefix is the API server's etcd prefix (--etcd-prefix).
	Prefix string
	// Claims, when set, encodes and decodes ResourceClaims as the API
	// server's storage layer does for them (serve's native storage:
	// protobuf, encryption at rest); nil: JSON, as a CRD's storage.
	Claims ClaimCodec
}

// ClaimCodec is how ResourceClaims are stored at a key.
type ClaimCodec interface {
	Encode(ctx context.Context, key string, c *quotav1alpha1.ResourceClaim) ([]byte, error)
	Decode(ctx context.Context, key string, data []byte) (*quotav1alpha1.ResourceClaim, error)
}

// jsonClaims stores claims as a CRD's storage does.
type jsonClaims struct{ apiVersion string }

func (j jsonClaims) Encode(_ context.Context, _ string, c *quotav1alpha1.ResourceClaim) ([]byte, error) {
	stored := c.DeepCopy()
	stored.APIVersion, stored.Kind = j.apiVersion, "ResourceClaim"
	return json.Marshal(stored)
}

func (jsonClaims) Decode(_ context.Context, _ string, data []byte) (*quotav1alpha1.ResourceClaim, error) {
	c := &quotav1alpha1.ResourceClaim{}
	return c, json.Unmarshal(data, c)
}

// maxJournalOps keeps a transaction under etcd's default --max-txn-ops (128).
const maxJournalOps = 120

// journal writes grants made at admission, and their claims, straight into
// the API server's storage. Every transaction holds only while the ledger's
// key is unchanged since this leader last wrote it: a leader deposed by a
// newer stamp can write nothing.
type Journal struct {
	s      *Storage
	ledger *Ledger
	// claimVersion is the apiVersion the API server stores ResourceClaims in.
	claimVersion string
	claims       ClaimCodec
}

// journalOps is one batch of journal writes.
type Ops struct {
	// grants are recorded as pending: their objects may not exist yet.
	Grants []*formats.PendingClaim
	// creates are claims written decided and owned, each replacing its
	// pending grant in the same transaction.
	Creates []*quotav1alpha1.ResourceClaim
	// releases are pending grants dropped: their objects never appeared.
	Releases []string
}

func (o *Ops) empty() bool {
	return o == nil || len(o.Grants)+len(o.Creates)+len(o.Releases) == 0
}

func (o *Ops) merge(x *Ops) {
	o.Grants = append(o.Grants, x.Grants...)
	o.Creates = append(o.Creates, x.Creates...)
	o.Releases = append(o.Releases, x.Releases...)
}

// ErrClaimExists means a claim of that name is already stored: the create
// was not written, the rest of its batch was.
type ErrClaimExists struct{ key string }

func (e ErrClaimExists) Error() string {
	return fmt.Sprintf("a ResourceClaim %s already exists", e.key)
}

func (j *Journal) ledgerKey() string {
	return path.Join(j.s.Prefix, "configmaps", j.ledger.namespace, j.ledger.name)
}

// pendingPrefix holds the grants made at admission whose claims are not
// written yet. It is outside every API resource's key range.
func (j *Journal) pendingPrefix() string {
	return formats.AdmissionGrantsPrefix(j.s.Prefix)
}

func (j *Journal) pendingKey(claimKey string) string {
	return j.pendingPrefix() + claimKey
}

func (j *Journal) claimKey(ns, name string) string {
	return path.Join(j.s.Prefix, quotav1alpha1.SchemeGroupVersion.Group, "resourceclaims", ns, name)
}

// NewJournal writes admission's grants and claims into s, fenced by l. It
// writes ResourceClaims in the apiVersion the server stores them in, read from
// the same CRD the server installs, exactly as the server's storage would.
func NewJournal(s *Storage, l *Ledger) (*Journal, error) {
	v, err := crd.StorageVersion("ResourceClaim")
	if err != nil {
		return nil, err
	}
	if v != quotav1alpha1.SchemeGroupVersion.String() {
		// The engine's types are this version; a CRD storing another one
		// needs a conversion here first.
		return nil, fmt.Errorf("ResourceClaims are stored as %s, but the engine writes %s", v, quotav1alpha1.SchemeGroupVersion)
	}
	j := &Journal{s: s, ledger: l, claimVersion: v}
	if s != nil {
		j.claims = s.Claims
	}
	if j.claims == nil {
		j.claims = jsonClaims{apiVersion: v}
	}
	return j, nil
}

// Pending reads every grant made at admission and not yet written as a
// claim. Called after the stamp, it sees every grant an earlier leader made.
func (j *Journal) Pending(ctx context.Context) ([]*formats.PendingClaim, error) {
	resp, err := j.s.Client.Get(ctx, j.pendingPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("reading grants made at admission: %w", err)
	}
	out := make([]*formats.PendingClaim, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		p := &formats.PendingClaim{}
		if err := json.Unmarshal(kv.Value, p); err != nil {
			return nil, fmt.Errorf("grant made at admission %s is unreadable: %w", kv.Key, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// Write applies ops in fenced transactions of at most maxJournalOps keys,
// removing from ops what has been written (a retry after an error goes on
// where it stopped). Creates whose claim already exists are skipped and
// reported, by claim key; ErrDeposed means another leader stamped the ledger.
func (j *Journal) Write(ctx context.Context, ops *Ops, exists map[string]error) error {
	// etcd refuses a transaction that names a key twice: a key released by
	// two requests of one batch is deleted once.
	ops.Releases = slices.Compact(slices.Sorted(slices.Values(ops.Releases)))
	if done, err := j.writeTogether(ctx, ops); done || err != nil {
		return err
	}
	for len(ops.Grants) > 0 {
		n := min(len(ops.Grants), maxJournalOps/2)
		txn, conds, err := j.grantOps(ops.Grants[:n])
		if err != nil {
			return err
		}
		err = j.Commit(ctx, txn, conds)
		if errors.Is(err, errCompareFailed) {
			// A claim or grant of one of these names exists: record them
			// one by one, and report the ones that collide.
			for len(ops.Grants) > 0 && n > 0 {
				p := ops.Grants[0]
				txn, conds, err := j.grantOps(ops.Grants[:1])
				if err != nil {
					return err
				}
				err = j.Commit(ctx, txn, conds)
				if errors.Is(err, errCompareFailed) {
					exists[p.Key()], err = ErrClaimExists{key: p.Key()}, nil
				}
				if err != nil {
					return err
				}
				ops.Grants, n = ops.Grants[1:], n-1
			}
			continue
		}
		if err != nil {
			return err
		}
		ops.Grants = ops.Grants[n:]
	}
	for len(ops.Releases) > 0 {
		n := min(len(ops.Releases), maxJournalOps)
		var txn []clientv3.Op
		for _, k := range ops.Releases[:n] {
			txn = append(txn, clientv3.OpDelete(j.pendingKey(k)))
		}
		if err := j.Commit(ctx, txn, nil); err != nil {
			return err
		}
		ops.Releases = ops.Releases[n:]
	}
	for len(ops.Creates) > 0 {
		n := min(len(ops.Creates), maxJournalOps/2)
		var txn []clientv3.Op
		var conds []clientv3.Cmp
		for _, c := range ops.Creates[:n] {
			o, cmp, err := j.createOps(ctx, c)
			if err != nil {
				return err
			}
			txn, conds = append(txn, o...), append(conds, cmp)
		}
		err := j.Commit(ctx, txn, conds)
		if errors.Is(err, errCompareFailed) {
			// A claim of one of these names exists: write them one by one.
			for len(ops.Creates) > 0 && n > 0 {
				c := ops.Creates[0]
				o, cmp, err := j.createOps(ctx, c)
				if err != nil {
					return err
				}
				err = j.Commit(ctx, o, []clientv3.Cmp{cmp})
				if errors.Is(err, errCompareFailed) {
					k := formats.Key(c.Namespace, c.Name)
					exists[k], err = ErrClaimExists{key: k}, nil
				}
				if err != nil {
					return err
				}
				ops.Creates, n = ops.Creates[1:], n-1
			}
			continue
		}
		if err != nil {
			return err
		}
		ops.Creates = ops.Creates[n:]
	}
	return nil
}

// writeTogether writes a whole batch — new grants, releases and claims —
// in one fenced transaction when it fits in one and names no key twice: under
// load the committer's batches hold both admission's grants and the claims of
// creates that ended, and one transaction instead of two or three is one
// round of consensus and one fsync instead of several. done is false, with
// nothing written, when the batch does not fit or a condition failed (a
// name taken): Write then goes on as before, grants first and one by one
// where needed.
func (j *Journal) writeTogether(ctx context.Context, ops *Ops) (done bool, err error) {
	kinds := 0
	for _, n := range []int{len(ops.Grants), len(ops.Releases), len(ops.Creates)} {
		if n > 0 {
			kinds++
		}
	}
	if kinds < 2 || len(ops.Grants)*2+len(ops.Releases)+len(ops.Creates)*2 > maxJournalOps {
		return false, nil // one kind: the path below writes it in one already
	}
	txn, conds, err := j.grantOps(ops.Grants)
	if err != nil {
		return false, err
	}
	for _, k := range ops.Releases {
		txn = append(txn, clientv3.OpDelete(j.pendingKey(k)))
	}
	for _, c := range ops.Creates {
		o, cmp, err := j.createOps(ctx, c)
		if err != nil {
			return false, err
		}
		txn, conds = append(txn, o...), append(conds, cmp)
	}
	seen := make(map[string]bool, len(txn))
	for _, o := range txn {
		k := string(o.KeyBytes())
		if seen[k] {
			return false, nil // a key twice (a name released and granted again): apart
		}
		seen[k] = true
	}
	err = j.Commit(ctx, txn, conds)
	if errors.Is(err, errCompareFailed) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	ops.Grants, ops.Releases, ops.Creates = nil, nil, nil
	return true, nil
}

// grantOps records grants made at admission, each only if neither a claim
// nor another grant of its claim's name exists: a name that collides is
// refused at admission, never discovered after the object is stored.
// Duplicate names within one batch are refused by admit before this.
func (j *Journal) grantOps(grants []*formats.PendingClaim) ([]clientv3.Op, []clientv3.Cmp, error) {
	var txn []clientv3.Op
	var conds []clientv3.Cmp
	for _, p := range grants {
		v, err := json.Marshal(p)
		if err != nil {
			return nil, nil, err
		}
		pk := j.pendingKey(p.Key())
		txn = append(txn, clientv3.OpPut(pk, string(v)))
		conds = append(conds, clientv3.Compare(clientv3.CreateRevision(pk), "=", 0))
		if !p.Release { // a release writes no claim
			conds = append(conds, clientv3.Compare(clientv3.CreateRevision(j.claimKey(p.Namespace, p.Name)), "=", 0))
		}
	}
	return txn, conds, nil
}

// createOps writes a claim, as the API server stores it, if no claim of that
// name exists, and drops its pending grant.
func (j *Journal) createOps(ctx context.Context, c *quotav1alpha1.ResourceClaim) ([]clientv3.Op, clientv3.Cmp, error) {
	stored := c.DeepCopy()
	stored.ResourceVersion = "" // the storage's revision is the version
	ck := j.claimKey(c.Namespace, c.Name)
	v, err := j.claims.Encode(ctx, ck, stored)
	if err != nil {
		return nil, clientv3.Cmp{}, fmt.Errorf("encoding claim %s: %w", formats.Key(c.Namespace, c.Name), err)
	}
	return []clientv3.Op{
			clientv3.OpPut(ck, string(v)),
			clientv3.OpDelete(j.pendingKey(formats.GrantKeyOf(c))),
		},
		clientv3.Compare(clientv3.CreateRevision(ck), "=", 0),
		nil
}

var errCompareFailed = errors.New("a condition of the transaction did not hold")

// Commit runs one transaction fenced by the ledger. When the fence fails it
// re-reads the ledger: a newer epoch means deposed; otherwise (an operator
// touched it) it retries with the new version.
func (j *Journal) Commit(ctx context.Context, ops []clientv3.Op, conds []clientv3.Cmp) error {
	if len(ops) == 0 {
		return nil
	}
	for {
		rv := j.ledger.revision()
		rev, err := strconv.ParseInt(rv, 10, 64)
		if err != nil {
			return fmt.Errorf("the ledger's resourceVersion %q is not an etcd revision: %w", rv, err)
		}
		fence := clientv3.Compare(clientv3.ModRevision(j.ledgerKey()), "=", rev)
		resp, err := j.s.Client.Txn(ctx).If(append([]clientv3.Cmp{fence}, conds...)...).Then(ops...).
			Else(clientv3.OpGet(j.ledgerKey(), clientv3.WithKeysOnly())).Commit()
		if err != nil {
			return fmt.Errorf("writing grants made at admission: %w", err)
		}
		if resp.Succeeded {
			enginemetrics.LedgerWrites.Inc()
			return nil
		}
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 && kvs[0].ModRevision == rev {
			return errCompareFailed // the fence held; a claim exists
		}
		if err := j.ledger.Refresh(ctx); err != nil {
			return err
		}
	}
}

// BudgetKey is the journal key of the budget hold of a grant.
func (j *Journal) BudgetKey(grantKey string) string {
	return formats.BudgetHoldsPrefix(j.s.Prefix) + grantKey
}

// RecordBudgetHold writes a hold, fenced like every journal write.
func (j *Journal) RecordBudgetHold(ctx context.Context, r *formats.BudgetHold) error {
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return j.Commit(ctx, []clientv3.Op{clientv3.OpPut(j.BudgetKey(r.Key()), string(v))}, nil)
}

// BudgetHolds reads every hold recorded in the journal.
func (j *Journal) BudgetHolds(ctx context.Context) ([]*formats.BudgetHold, error) {
	resp, err := j.s.Client.Get(ctx, formats.BudgetHoldsPrefix(j.s.Prefix), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("reading budget holds: %w", err)
	}
	out := make([]*formats.BudgetHold, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		r := &formats.BudgetHold{}
		if err := json.Unmarshal(kv.Value, r); err != nil {
			return nil, fmt.Errorf("budget hold %s is unreadable: %w", kv.Key, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Replace writes an update's new claim c (none for a release), deletes the
// claims it replaces that are still the ones it names (same UID), and drops
// its pending entry, in one fenced transaction. ErrClaimExists: a claim of
// c's name exists; nothing was written.
func (j *Journal) Replace(ctx context.Context, p *formats.PendingClaim, c *quotav1alpha1.ResourceClaim) error {
	for {
		ops := []clientv3.Op{clientv3.OpDelete(j.pendingKey(p.Key()))}
		var conds []clientv3.Cmp
		if c != nil {
			o, cmp, err := j.createOps(ctx, c)
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
				return fmt.Errorf("reading claim %s: %w", r.Key(), err)
			}
			if len(resp.Kvs) == 0 {
				continue // deleted meanwhile
			}
			stored, err := j.claims.Decode(ctx, ck, resp.Kvs[0].Value)
			if err != nil || string(stored.UID) != r.UID {
				continue // another claim of that name: not this one's
			}
			ops = append(ops, clientv3.OpDelete(ck))
			conds = append(conds, clientv3.Compare(clientv3.ModRevision(ck), "=", resp.Kvs[0].ModRevision))
		}
		err := j.Commit(ctx, ops, conds)
		if !errors.Is(err, errCompareFailed) {
			return err
		}
		if c != nil {
			resp, err := j.s.Client.Get(ctx, j.claimKey(c.Namespace, c.Name), clientv3.WithKeysOnly())
			if err != nil {
				return err
			}
			if len(resp.Kvs) > 0 {
				return ErrClaimExists{key: formats.Key(c.Namespace, c.Name)}
			}
		}
		// A replaced claim changed between the read and the write (its
		// status written, say): read again.
	}
}
