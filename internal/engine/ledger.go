package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// errDeposed means another replica has stamped the ledger with a newer
// epoch: this replica must stop deciding at once.
var errDeposed = errors.New("another quota engine replica has taken over the ledger")

// ledger is the fence of the engine: a ConfigMap whose every update is a
// compare-and-swap on its resourceVersion. A leader stamps it with a new epoch
// before deciding anything, and records each grant in it before the grant is
// written to the claim. A deposed leader's next update conflicts, re-reads a
// newer epoch and stops; a grant it recorded before the stamp is seen, and
// honoured, by the new leader.
type ledger struct {
	client    kubernetes.Interface
	namespace string
	name      string
	holder    string

	// journal is set by a replica that writes admission's journal (serve):
	// the ledger then says so, and an engine without the journal refuses
	// to decide on that store (it would ignore the journal's grants).
	journal bool

	epoch int64
	rv    string
	// uid is the ledger object's identity: a ledger deleted and created
	// again is another ledger, whatever epoch it holds.
	uid string
}

// pendingClaim is a claim granted at admission whose object may not exist
// yet: the journal holds all of it, so that a new leader can create it.
type pendingClaim struct {
	Namespace string            `json:"ns"`
	Name      string            `json:"n"`
	Labels    map[string]string `json:"l,omitempty"`
	// Extra are the template's annotations; the engine's own are fields.
	Extra     map[string]string               `json:"a,omitempty"`
	Policy    string                          `json:"p"`
	Resource  string                          `json:"r"`
	ObjectUID string                          `json:"u"`
	Spec      quotav1alpha1.ResourceClaimSpec `json:"s"`
	Created   metav1.Time                     `json:"c"`

	// Update: an update of the object changed what Policy charges for it.
	// The claim above (none with Release) replaces the claims in Replaces
	// once the update is stored; until then only Growth, what the new claim
	// asks beyond what those hold, is held besides them. Check lets a later
	// leader find out whether the update was stored (update.go).
	Update   bool                            `json:"upd,omitempty"`
	Release  bool                            `json:"rel,omitempty"`
	Replaces []replacedClaim                 `json:"x,omitempty"`
	Growth   []quotav1alpha1.ResourceRequest `json:"gr,omitempty"`
	Check    *UpdateCheck                    `json:"k,omitempty"`
	// ClaimUID is the UID the new claim is written with, chosen at
	// admission: the cache adopts a claim for this entry only by it (a claim
	// an earlier entry of the same name wrote may be seen late).
	ClaimUID string `json:"cu,omitempty"`

	// outcome is what this server reported of the create, when it ended.
	outcome outcome
	ended   time.Time
}

func newPendingClaim(c *quotav1alpha1.ResourceClaim, created metav1.Time) *pendingClaim {
	p := &pendingClaim{Namespace: c.Namespace, Name: c.Name, Spec: c.Spec, Created: created,
		Policy: c.Annotations[AnnotationPolicy], Resource: c.Annotations[AnnotationResource], ObjectUID: c.Annotations[AnnotationResourceUID]}
	if len(c.Labels) > 0 {
		p.Labels = c.Labels
	}
	for k, v := range c.Annotations {
		if k != AnnotationPolicy && k != AnnotationResource && k != AnnotationResourceUID {
			if p.Extra == nil {
				p.Extra = map[string]string{}
			}
			p.Extra[k] = v
		}
	}
	return p
}

func (p *pendingClaim) annotations() map[string]string {
	a := map[string]string{AnnotationPolicy: p.Policy, AnnotationResource: p.Resource, AnnotationResourceUID: p.ObjectUID}
	for k, v := range p.Extra {
		a[k] = v
	}
	return a
}

// key is the claim's namespace/name; a release (no new claim) is keyed by
// the first claim it releases, with a suffix no claim name can have.
func (p *pendingClaim) key() string {
	if p.Release {
		return key(p.Namespace, p.Name) + releaseSuffix
	}
	return key(p.Namespace, p.Name)
}

const releaseSuffix = "#release"

// ledgerState is what the ledger records besides its epoch: grants not yet
// written to their claims (claim UID → namespace/name). Grants made at
// admission are in the journal.
type ledgerState struct {
	Inflight map[string]string
	// Holder is the identity of the leader that stamped it last.
	Holder string `json:"-"`
}

const (
	ledgerEpochKey    = "epoch"
	ledgerHolderKey   = "holder"
	ledgerInflightKey = "inflight"
	ledgerJournalKey  = "admission-journal"
)

// ErrJournalInUse refuses an engine without admission's journal on a store
// where quotaplane serve admits: it would not see the grants made at
// admission and would decide differently.
var ErrJournalInUse = errors.New("this API server is a quotaplane serve, whose in-process quota engine decides and admits " +
	"(its admission journal is in use); a quotaplane controller against it would ignore that journal and decide differently, " +
	"so it refuses to run: use quotaplane controller only against API servers that are not quotaplane serve, " +
	"and run more serve replicas to scale serve")

// stamp takes the ledger over with a new epoch and returns the grants the
// previous leaders recorded and may not have written.
func (l *ledger) stamp(ctx context.Context) (ledgerState, error) {
	for {
		cm, err := l.client.CoreV1().ConfigMaps(l.namespace).Get(ctx, l.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.namespace}}
			cm.Data = map[string]string{ledgerEpochKey: "0", ledgerInflightKey: "{}"}
			if cm, err = l.client.CoreV1().ConfigMaps(l.namespace).Create(ctx, cm, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
				continue
			}
		}
		if err != nil {
			return ledgerState{}, fmt.Errorf("reading the ledger %s/%s: %w", l.namespace, l.name, err)
		}
		epoch, state, err := decodeLedger(cm)
		if err != nil {
			return ledgerState{}, err
		}
		if cm.Data[ledgerJournalKey] == "true" && !l.journal {
			return ledgerState{}, ErrJournalInUse
		}
		next := cm.DeepCopy()
		next.Data[ledgerEpochKey] = strconv.FormatInt(epoch+1, 10)
		next.Data[ledgerHolderKey] = l.holder
		if l.journal {
			next.Data[ledgerJournalKey] = "true"
		}
		updated, err := l.client.CoreV1().ConfigMaps(l.namespace).Update(ctx, next, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return ledgerState{}, fmt.Errorf("stamping the ledger: %w", err)
		}
		l.epoch, l.rv, l.uid = epoch+1, updated.ResourceVersion, string(updated.UID)
		return state, nil
	}
}

// record replaces the in-flight grants, under this leader's epoch. It returns
// errDeposed when another leader has stamped the ledger since.
func (l *ledger) record(ctx context.Context, state ledgerState) error {
	data, err := json.Marshal(state.Inflight)
	if err != nil {
		return err
	}
	for {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.namespace, ResourceVersion: l.rv, UID: types.UID(l.uid)},
			Data: map[string]string{
				ledgerEpochKey:    strconv.FormatInt(l.epoch, 10),
				ledgerHolderKey:   l.holder,
				ledgerInflightKey: string(data),
			},
		}
		if l.journal {
			cm.Data[ledgerJournalKey] = "true"
		}
		updated, err := l.client.CoreV1().ConfigMaps(l.namespace).Update(ctx, cm, metav1.UpdateOptions{})
		if err == nil {
			l.rv = updated.ResourceVersion
			return nil
		}
		if apierrors.IsNotFound(err) {
			// Deleted: the grants it held are not known to any next leader
			// either, and none of them was written; this term ends, and the
			// next one starts a new ledger from the stored claims.
			return fmt.Errorf("%w: the ledger %s/%s was deleted", errDeposed, l.namespace, l.name)
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("recording grants in the ledger: %w", err)
		}
		if err := l.refresh(ctx); err != nil {
			return err
		}
	}
}

// refresh re-reads the ledger after a write found it changed: errDeposed when
// another leader stamped it; otherwise (an operator touched it without a new
// epoch) the next write uses its new version.
func (l *ledger) refresh(ctx context.Context) error {
	current, err := l.client.CoreV1().ConfigMaps(l.namespace).Get(ctx, l.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: the ledger %s/%s was deleted", errDeposed, l.namespace, l.name)
	}
	if err != nil {
		return fmt.Errorf("re-reading the ledger: %w", err)
	}
	epoch, _, err := decodeLedger(current)
	if err != nil {
		return err
	}
	// Another ledger object (deleted and created again, its epoch starting
	// over), another epoch or another holder: deposed. Only the same ledger,
	// touched by an operator without a stamp, is written again.
	if string(current.UID) != l.uid || epoch != l.epoch || current.Data[ledgerHolderKey] != l.holder {
		return errDeposed
	}
	l.rv = current.ResourceVersion
	return nil
}

func decodeLedger(cm *corev1.ConfigMap) (int64, ledgerState, error) {
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	state := ledgerState{Inflight: map[string]string{}, Holder: cm.Data[ledgerHolderKey]}
	epoch, err := strconv.ParseInt(cm.Data[ledgerEpochKey], 10, 64)
	if err != nil && cm.Data[ledgerEpochKey] != "" {
		return 0, state, fmt.Errorf("the ledger %s/%s has an invalid epoch %q; do not edit it by hand", cm.Namespace, cm.Name, cm.Data[ledgerEpochKey])
	}
	if s := cm.Data[ledgerInflightKey]; s != "" {
		if err := json.Unmarshal([]byte(s), &state.Inflight); err != nil {
			return 0, state, fmt.Errorf("the ledger %s/%s has invalid in-flight grants: %w", cm.Namespace, cm.Name, err)
		}
	}
	if state.Inflight == nil {
		state.Inflight = map[string]string{}
	}
	return epoch, state, nil
}
