package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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

	epoch int64
	rv    string
	// inflight are grants recorded but perhaps not yet written to their
	// claims: claim UID → namespace/name.
	inflight map[string]string
}

const (
	ledgerEpochKey    = "epoch"
	ledgerHolderKey   = "holder"
	ledgerInflightKey = "inflight"
)

// stamp takes the ledger over with a new epoch and returns the grants the
// previous leaders recorded and may not have written.
func (l *ledger) stamp(ctx context.Context) (map[string]string, error) {
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
			return nil, fmt.Errorf("reading the ledger %s/%s: %w", l.namespace, l.name, err)
		}
		epoch, inflight, err := decodeLedger(cm)
		if err != nil {
			return nil, err
		}
		next := cm.DeepCopy()
		next.Data[ledgerEpochKey] = strconv.FormatInt(epoch+1, 10)
		next.Data[ledgerHolderKey] = l.holder
		updated, err := l.client.CoreV1().ConfigMaps(l.namespace).Update(ctx, next, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("stamping the ledger: %w", err)
		}
		l.epoch, l.rv, l.inflight = epoch+1, updated.ResourceVersion, inflight
		return maps.Clone(inflight), nil
	}
}

// record replaces the in-flight grants, under this leader's epoch. It returns
// errDeposed when another leader has stamped the ledger since.
func (l *ledger) record(ctx context.Context, inflight map[string]string) error {
	data, err := json.Marshal(inflight)
	if err != nil {
		return err
	}
	for {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.namespace, ResourceVersion: l.rv},
			Data: map[string]string{
				ledgerEpochKey:    strconv.FormatInt(l.epoch, 10),
				ledgerHolderKey:   l.holder,
				ledgerInflightKey: string(data),
			},
		}
		updated, err := l.client.CoreV1().ConfigMaps(l.namespace).Update(ctx, cm, metav1.UpdateOptions{})
		if err == nil {
			l.rv, l.inflight = updated.ResourceVersion, maps.Clone(inflight)
			return nil
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("recording grants in the ledger: %w", err)
		}
		current, err := l.client.CoreV1().ConfigMaps(l.namespace).Get(ctx, l.name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("re-reading the ledger: %w", err)
		}
		epoch, _, err := decodeLedger(current)
		if err != nil {
			return err
		}
		if epoch != l.epoch {
			return errDeposed
		}
		l.rv = current.ResourceVersion // someone touched it without a new epoch (an operator); retry
	}
}

func decodeLedger(cm *corev1.ConfigMap) (int64, map[string]string, error) {
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	epoch, err := strconv.ParseInt(cm.Data[ledgerEpochKey], 10, 64)
	if err != nil && cm.Data[ledgerEpochKey] != "" {
		return 0, nil, fmt.Errorf("the ledger %s/%s has an invalid epoch %q; do not edit it by hand", cm.Namespace, cm.Name, cm.Data[ledgerEpochKey])
	}
	inflight := map[string]string{}
	if s := cm.Data[ledgerInflightKey]; s != "" {
		if err := json.Unmarshal([]byte(s), &inflight); err != nil {
			return 0, nil, fmt.Errorf("the ledger %s/%s has invalid in-flight grants: %w", cm.Namespace, cm.Name, err)
		}
	}
	return epoch, inflight, nil
}
