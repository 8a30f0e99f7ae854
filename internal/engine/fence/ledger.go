package fence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/quotaplane/quotaplane/internal/engine/enginemetrics"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
)

// ErrDeposed means another replica has stamped the ledger with a newer
// epoch: this replica must stop deciding at once.
var ErrDeposed = errors.New("another quota engine replica has taken over the ledger")

// Ledger is the fence of the engine: a ConfigMap whose every update is a
// compare-and-swap on its resourceVersion. A leader stamps it with a new epoch
// before deciding anything, and records each grant in it before the grant is
// written to the claim. A deposed leader's next update conflicts, re-reads a
// newer epoch and stops; a grant it recorded before the stamp is seen, and
// honoured, by the new leader.
type Ledger struct {
	client    kubernetes.Interface
	namespace string
	name      string
	holder    string

	// journal is set by a replica that writes admission's journal (serve):
	// the ledger then says so, and an engine without the journal refuses
	// to decide on that store (it would ignore the journal's grants).
	journal bool

	epoch int64
	// rvMu guards rv: the committer writes it, and journal transactions
	// made outside the committer (an update's replacement, a budget hold)
	// read it, and may refresh it, concurrently.
	rvMu sync.Mutex
	rv   string
	// uid is the ledger object's identity: a ledger deleted and created
	// again is another ledger, whatever epoch it holds.
	uid string
}

// NewLedger is the ledger formats.LedgerName in namespace, stamped by holder.
// withJournal is set by a replica that writes admission's journal (serve).
func NewLedger(client kubernetes.Interface, namespace, holder string, withJournal bool) *Ledger {
	return &Ledger{client: client, namespace: namespace, name: formats.LedgerName, holder: holder, journal: withJournal}
}

// revision is the ledger's resourceVersion as this leader last wrote or
// read it.
func (l *Ledger) revision() string {
	l.rvMu.Lock()
	defer l.rvMu.Unlock()
	return l.rv
}

func (l *Ledger) setRevision(rv string) {
	l.rvMu.Lock()
	l.rv = rv
	l.rvMu.Unlock()
}

// Epoch is the epoch this replica stamped.
func (l *Ledger) Epoch() int64 { return l.epoch }

// ErrJournalInUse refuses an engine without admission's journal on a store
// where quotaplane serve admits: it would not see the grants made at
// admission and would decide differently.
var ErrJournalInUse = errors.New("this API server is a quotaplane serve, whose in-process quota engine decides and admits " +
	"(its admission journal is in use); a quotaplane controller against it would ignore that journal and decide differently, " +
	"so it refuses to run: use quotaplane controller only against API servers that are not quotaplane serve, " +
	"and run more serve replicas to scale serve")

// Stamp takes the ledger over with a new epoch and returns the grants the
// previous leaders recorded and may not have written.
func (l *Ledger) Stamp(ctx context.Context) (formats.LedgerState, error) {
	for {
		cm, err := l.client.CoreV1().ConfigMaps(l.namespace).Get(ctx, l.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.namespace}}
			cm.Data = map[string]string{formats.LedgerEpochKey: "0", formats.LedgerInflightKey: "{}"}
			if cm, err = l.client.CoreV1().ConfigMaps(l.namespace).Create(ctx, cm, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
				continue
			}
		}
		if err != nil {
			return formats.LedgerState{}, fmt.Errorf("reading the ledger %s/%s: %w", l.namespace, l.name, err)
		}
		epoch, state, err := formats.DecodeLedger(cm)
		if err != nil {
			return formats.LedgerState{}, err
		}
		if cm.Data[formats.LedgerJournalKey] == "true" && !l.journal {
			return formats.LedgerState{}, ErrJournalInUse
		}
		next := cm.DeepCopy()
		if next.Data == nil {
			next.Data = map[string]string{}
		}
		next.Data[formats.LedgerEpochKey] = strconv.FormatInt(epoch+1, 10)
		next.Data[formats.LedgerHolderKey] = l.holder
		if l.journal {
			next.Data[formats.LedgerJournalKey] = "true"
		}
		updated, err := l.client.CoreV1().ConfigMaps(l.namespace).Update(ctx, next, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return formats.LedgerState{}, fmt.Errorf("stamping the ledger: %w", err)
		}
		l.epoch, l.uid = epoch+1, string(updated.UID)
		l.setRevision(updated.ResourceVersion)
		enginemetrics.LedgerWrites.Inc()
		return state, nil
	}
}

// Record replaces the in-flight grants, under this leader's epoch. It returns
// ErrDeposed when another leader has stamped the ledger since.
func (l *Ledger) Record(ctx context.Context, state formats.LedgerState) error {
	data, err := json.Marshal(state.Inflight)
	if err != nil {
		return err
	}
	var windows []byte
	if len(state.Windows) > 0 {
		if windows, err = json.Marshal(state.Windows); err != nil {
			return err
		}
	}
	for {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.namespace, ResourceVersion: l.revision(), UID: types.UID(l.uid)},
			Data: map[string]string{
				formats.LedgerEpochKey:    strconv.FormatInt(l.epoch, 10),
				formats.LedgerHolderKey:   l.holder,
				formats.LedgerInflightKey: string(data),
			},
		}
		if l.journal {
			cm.Data[formats.LedgerJournalKey] = "true"
		}
		if windows != nil {
			cm.Data[formats.LedgerWindowsKey] = string(windows)
		}
		updated, err := l.client.CoreV1().ConfigMaps(l.namespace).Update(ctx, cm, metav1.UpdateOptions{})
		if err == nil {
			l.setRevision(updated.ResourceVersion)
			enginemetrics.LedgerWrites.Inc()
			return nil
		}
		if apierrors.IsNotFound(err) {
			// Deleted: the grants it held are not known to any next leader
			// either, and none of them was written; this term ends, and the
			// next one starts a new ledger from the stored claims.
			return fmt.Errorf("%w: the ledger %s/%s was deleted", ErrDeposed, l.namespace, l.name)
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("recording grants in the ledger: %w", err)
		}
		if err := l.Refresh(ctx); err != nil {
			return err
		}
	}
}

// Refresh re-reads the ledger after a write found it changed: ErrDeposed when
// another leader stamped it; otherwise (an operator touched it without a new
// epoch) the next write uses its new version.
func (l *Ledger) Refresh(ctx context.Context) error {
	current, err := l.client.CoreV1().ConfigMaps(l.namespace).Get(ctx, l.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: the ledger %s/%s was deleted", ErrDeposed, l.namespace, l.name)
	}
	if err != nil {
		return fmt.Errorf("re-reading the ledger: %w", err)
	}
	epoch, _, err := formats.DecodeLedger(current)
	if err != nil {
		return err
	}
	// Another ledger object (deleted and created again, its epoch starting
	// over), another epoch or another holder: deposed. Only the same ledger,
	// touched by an operator without a stamp, is written again.
	if string(current.UID) != l.uid || epoch != l.epoch || current.Data[formats.LedgerHolderKey] != l.holder {
		return ErrDeposed
	}
	l.setRevision(current.ResourceVersion)
	return nil
}
