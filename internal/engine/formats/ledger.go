package formats

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Names of the engine's objects in the system namespace.
const (
	// LedgerName is the ConfigMap that fences the engine's decisions.
	LedgerName = "quotaplane-decision-ledger"
	// LeaseName is the Lease the engine's replicas elect their leader on.
	LeaseName = "quotaplane-quota-engine"
	// RebuildName is the ConfigMap through which an operator (quotaplane
	// verify --repair) asks for a new engine term, which rebuilds every
	// bucket from storage and settles every grant in flight: a new value of
	// RebuildRequestedKey ends the term in force; the next term writes that
	// value to RebuildDoneKey once it has rebuilt.
	RebuildName         = "quotaplane-engine-rebuild"
	RebuildRequestedKey = "requested"
	RebuildDoneKey      = "done"
)

// The ledger ConfigMap's data keys.
const (
	LedgerEpochKey    = "epoch"
	LedgerHolderKey   = "holder"
	LedgerInflightKey = "inflight"
	// LedgerWindowsKey holds the grant window phases recorded and not yet
	// seen on their grants (WindowRecord, by grant UID).
	LedgerWindowsKey = "windows"
	// LedgerJournalKey is "true" once an engine with admission's journal
	// (quotaplane serve) has led on this store.
	LedgerJournalKey = "admission-journal"
)

// LedgerState is what the ledger records besides its epoch: grants not yet
// written to their claims (claim UID → namespace/name). Grants made at
// admission are in the journal.
type LedgerState struct {
	Inflight map[string]string
	// Windows are the grant window phases recorded by a leader and not yet
	// seen written on their grants, by grant UID.
	Windows map[string]WindowRecord
	// Holder is the identity of the leader that stamped it last.
	Holder string `json:"-"`
}

// DecodeLedger reads a ledger ConfigMap's epoch and state.
func DecodeLedger(cm *corev1.ConfigMap) (int64, LedgerState, error) {
	data := cm.Data
	state := LedgerState{Inflight: map[string]string{}, Holder: data[LedgerHolderKey]}
	epoch, err := strconv.ParseInt(data[LedgerEpochKey], 10, 64)
	if err != nil && data[LedgerEpochKey] != "" {
		return 0, state, fmt.Errorf("the ledger %s/%s has an invalid epoch %q; do not edit it by hand", cm.Namespace, cm.Name, data[LedgerEpochKey])
	}
	if s := data[LedgerInflightKey]; s != "" {
		if err := json.Unmarshal([]byte(s), &state.Inflight); err != nil {
			return 0, state, fmt.Errorf("the ledger %s/%s has invalid in-flight grants: %w", cm.Namespace, cm.Name, err)
		}
	}
	if state.Inflight == nil {
		state.Inflight = map[string]string{}
	}
	if s := data[LedgerWindowsKey]; s != "" {
		if err := json.Unmarshal([]byte(s), &state.Windows); err != nil {
			return 0, state, fmt.Errorf("the ledger %s/%s has invalid grant window records: %w", cm.Namespace, cm.Name, err)
		}
	}
	return epoch, state, nil
}

// WindowRecord is a grant window phase a leader recorded: the phase, for the
// window (its two bounds, zero when open) it was judged on.
type WindowRecord struct {
	Phase string    `json:"phase"`
	From  time.Time `json:"from,omitzero"`
	Until time.Time `json:"until,omitzero"`
}
