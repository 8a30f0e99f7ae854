package engine

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
	"github.com/quotaplane/quotaplane/internal/journalkeys"
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
}

// maxJournalOps keeps a transaction under etcd's default --max-txn-ops (128).
const maxJournalOps = 120

// journal writes grants made at admission, and their claims, straight into
// the API server's storage. Every transaction holds only while the ledger's
// key is unchanged since this leader last wrote it: a leader deposed by a
// newer stamp can write nothing.
type journal struct {
	s      *Storage
	ledger *ledger
}

// journalOps is one batch of journal writes.
type journalOps struct {
	// grants are recorded as pending: their objects may not exist yet.
	grants []*pendingClaim
	// creates are claims written decided and owned, each replacing its
	// pending grant in the same transaction.
	creates []*quotav1alpha1.ResourceClaim
	// releases are pending grants dropped: their objects never appeared.
	releases []string
}

func (o *journalOps) empty() bool {
	return o == nil || len(o.grants)+len(o.creates)+len(o.releases) == 0
}

func (o *journalOps) merge(x *journalOps) {
	o.grants = append(o.grants, x.grants...)
	o.creates = append(o.creates, x.creates...)
	o.releases = append(o.releases, x.releases...)
}

// errClaimExists means a claim of that name is already stored: the create
// was not written, the rest of its batch was.
type errClaimExists struct{ key string }

func (e errClaimExists) Error() string {
	return fmt.Sprintf("a ResourceClaim %s already exists", e.key)
}

func (j *journal) ledgerKey() string {
	return path.Join(j.s.Prefix, "configmaps", j.ledger.namespace, j.ledger.name)
}

// pendingPrefix holds the grants made at admission whose claims are not
// written yet. It is outside every API resource's key range.
func (j *journal) pendingPrefix() string {
	return journalkeys.AdmissionGrantsPrefix(j.s.Prefix)
}

func (j *journal) pendingKey(claimKey string) string {
	return j.pendingPrefix() + claimKey
}

func (j *journal) claimKey(ns, name string) string {
	return path.Join(j.s.Prefix, quotav1alpha1.SchemeGroupVersion.Group, "resourceclaims", ns, name)
}

// claimStorageVersion is the apiVersion the API server stores ResourceClaims
// in, read from the same CRD the server installs; the journal writes claims
// exactly as the server's storage would (JSON, this version).
var claimStorageVersion = func() string {
	v, err := crd.StorageVersion("ResourceClaim")
	if err != nil {
		panic(err)
	}
	if v != quotav1alpha1.SchemeGroupVersion.String() {
		// The engine's types are this version; a CRD storing another one
		// needs a conversion here first.
		panic(fmt.Sprintf("ResourceClaims are stored as %s, but the engine writes %s", v, quotav1alpha1.SchemeGroupVersion))
	}
	return v
}()

// pending reads every grant made at admission and not yet written as a
// claim. Called after the stamp, it sees every grant an earlier leader made.
func (j *journal) pending(ctx context.Context) ([]*pendingClaim, error) {
	resp, err := j.s.Client.Get(ctx, j.pendingPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("reading grants made at admission: %w", err)
	}
	out := make([]*pendingClaim, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		p := &pendingClaim{}
		if err := json.Unmarshal(kv.Value, p); err != nil {
			return nil, fmt.Errorf("grant made at admission %s is unreadable: %w", kv.Key, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// write applies ops in fenced transactions of at most maxJournalOps keys,
// removing from ops what has been written (a retry after an error goes on
// where it stopped). Creates whose claim already exists are skipped and
// reported, by claim key; errDeposed means another leader stamped the ledger.
func (j *journal) write(ctx context.Context, ops *journalOps, exists map[string]error) error {
	// etcd refuses a transaction that names a key twice: a key released by
	// two requests of one batch is deleted once.
	ops.releases = slices.Compact(slices.Sorted(slices.Values(ops.releases)))
	for len(ops.grants) > 0 {
		n := min(len(ops.grants), maxJournalOps/2)
		txn, conds, err := j.grantOps(ops.grants[:n])
		if err != nil {
			return err
		}
		err = j.commit(ctx, txn, conds)
		if errors.Is(err, errCompareFailed) {
			// A claim or grant of one of these names exists: record them
			// one by one, and report the ones that collide.
			for len(ops.grants) > 0 && n > 0 {
				p := ops.grants[0]
				txn, conds, err := j.grantOps(ops.grants[:1])
				if err != nil {
					return err
				}
				err = j.commit(ctx, txn, conds)
				if errors.Is(err, errCompareFailed) {
					exists[p.key()], err = errClaimExists{key: p.key()}, nil
				}
				if err != nil {
					return err
				}
				ops.grants, n = ops.grants[1:], n-1
			}
			continue
		}
		if err != nil {
			return err
		}
		ops.grants = ops.grants[n:]
	}
	for len(ops.releases) > 0 {
		n := min(len(ops.releases), maxJournalOps)
		var txn []clientv3.Op
		for _, k := range ops.releases[:n] {
			txn = append(txn, clientv3.OpDelete(j.pendingKey(k)))
		}
		if err := j.commit(ctx, txn, nil); err != nil {
			return err
		}
		ops.releases = ops.releases[n:]
	}
	for len(ops.creates) > 0 {
		n := min(len(ops.creates), maxJournalOps/2)
		var txn []clientv3.Op
		var conds []clientv3.Cmp
		for _, c := range ops.creates[:n] {
			o, cmp, err := j.createOps(c)
			if err != nil {
				return err
			}
			txn, conds = append(txn, o...), append(conds, cmp)
		}
		err := j.commit(ctx, txn, conds)
		if errors.Is(err, errCompareFailed) {
			// A claim of one of these names exists: write them one by one.
			for len(ops.creates) > 0 && n > 0 {
				c := ops.creates[0]
				o, cmp, err := j.createOps(c)
				if err != nil {
					return err
				}
				err = j.commit(ctx, o, []clientv3.Cmp{cmp})
				if errors.Is(err, errCompareFailed) {
					k := key(c.Namespace, c.Name)
					exists[k], err = errClaimExists{key: k}, nil
				}
				if err != nil {
					return err
				}
				ops.creates, n = ops.creates[1:], n-1
			}
			continue
		}
		if err != nil {
			return err
		}
		ops.creates = ops.creates[n:]
	}
	return nil
}

// grantOps records grants made at admission, each only if neither a claim
// nor another grant of its claim's name exists: a name that collides is
// refused at admission, never discovered after the object is stored.
// Duplicate names within one batch are refused by admit before this.
func (j *journal) grantOps(grants []*pendingClaim) ([]clientv3.Op, []clientv3.Cmp, error) {
	var txn []clientv3.Op
	var conds []clientv3.Cmp
	for _, p := range grants {
		v, err := json.Marshal(p)
		if err != nil {
			return nil, nil, err
		}
		pk := j.pendingKey(p.key())
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
func (j *journal) createOps(c *quotav1alpha1.ResourceClaim) ([]clientv3.Op, clientv3.Cmp, error) {
	stored := c.DeepCopy()
	stored.APIVersion, stored.Kind = claimStorageVersion, "ResourceClaim"
	stored.ResourceVersion = "" // the storage's revision is the version
	v, err := json.Marshal(stored)
	if err != nil {
		return nil, clientv3.Cmp{}, err
	}
	ck := j.claimKey(c.Namespace, c.Name)
	return []clientv3.Op{
			clientv3.OpPut(ck, string(v)),
			clientv3.OpDelete(j.pendingKey(grantKeyOf(c))),
		},
		clientv3.Compare(clientv3.CreateRevision(ck), "=", 0),
		nil
}

var errCompareFailed = errors.New("a condition of the transaction did not hold")

// commit runs one transaction fenced by the ledger. When the fence fails it
// re-reads the ledger: a newer epoch means deposed; otherwise (an operator
// touched it) it retries with the new version.
func (j *journal) commit(ctx context.Context, ops []clientv3.Op, conds []clientv3.Cmp) error {
	if len(ops) == 0 {
		return nil
	}
	for {
		rev, err := strconv.ParseInt(j.ledger.rv, 10, 64)
		if err != nil {
			return fmt.Errorf("the ledger's resourceVersion %q is not an etcd revision: %w", j.ledger.rv, err)
		}
		fence := clientv3.Compare(clientv3.ModRevision(j.ledgerKey()), "=", rev)
		resp, err := j.s.Client.Txn(ctx).If(append([]clientv3.Cmp{fence}, conds...)...).Then(ops...).
			Else(clientv3.OpGet(j.ledgerKey(), clientv3.WithKeysOnly())).Commit()
		if err != nil {
			return fmt.Errorf("writing grants made at admission: %w", err)
		}
		if resp.Succeeded {
			ledgerWrites.Inc()
			return nil
		}
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 && kvs[0].ModRevision == rev {
			return errCompareFailed // the fence held; a claim exists
		}
		if err := j.ledger.refresh(ctx); err != nil {
			return err
		}
	}
}

// FailOpenRecord says that an object was admitted without its quota being
// decided (docs/admission.md); quotaplane verify lists these apart from damage.
type FailOpenRecord = journalkeys.FailOpenRecord

// RecordFailOpen writes the record of a create admitted fail-open. It is
// not fenced: any replica may admit fail-open, leader or not. It returns an
// error when there is no storage to write to.
func (h *Handle) RecordFailOpen(ctx context.Context, r FailOpenRecord) error {
	s := h.storage.Load()
	if s == nil {
		return errors.New("this quota engine has no direct access to the server's storage")
	}
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = s.Client.Put(ctx, journalkeys.FailOpenKey(s.Prefix, r.UID), string(v))
	return err
}
