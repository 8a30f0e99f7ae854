package history

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Events recorded.
const (
	ClaimGranted     = "ClaimGranted"
	ClaimDenied      = "ClaimDenied"
	ClaimReleased    = "ClaimReleased"
	AdmissionRefused = "AdmissionRefused"
	GrantCreated     = "GrantCreated"
	GrantChanged     = "GrantChanged"
	GrantDeleted     = "GrantDeleted"
	LimitChanged     = "LimitChanged"
)

// Labels and keys of a history ConfigMap.
const (
	LabelHistory      = "quota.miloapis.com/decision-history"
	LabelConsumerKind = "quota.miloapis.com/consumer-kind"
	LabelConsumerName = "quota.miloapis.com/consumer-name"
	// AnnotationConsumer holds the consumer in full
	// (apiGroup/kind/namespace/name); labels may be shortened.
	AnnotationConsumer = "quota.miloapis.com/consumer"
	// DataKey holds the entries, oldest first, as a JSON list.
	DataKey = "entries.json"
)

// Limit is how many entries a consumer's history keeps.
const Limit = 100

// Entry is one decision.
type Entry struct {
	Time  time.Time `json:"time"`
	Event string    `json:"event"`
	// Object is what the decision was about: the claim, the grant, or the
	// object whose create was refused (which has no claim).
	Object ObjectRef `json:"object"`
	// For is the object a claim is for (its spec.resourceRef).
	For *ObjectRef `json:"for,omitempty"`
	// Policy is the ClaimCreationPolicy or GrantCreationPolicy involved.
	Policy   string   `json:"policy,omitempty"`
	Reason   string   `json:"reason,omitempty"`
	Message  string   `json:"message,omitempty"`
	Requests []Amount `json:"requests,omitempty"`
	// Buckets are the consumer's buckets of the resource types involved, as
	// the engine had last verified them when the decision was recorded.
	Buckets []Bucket `json:"buckets,omitempty"`
}

// ObjectRef names an object.
type ObjectRef struct {
	APIGroup  string `json:"apiGroup,omitempty"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
}

func (o ObjectRef) String() string {
	gk := o.Kind
	if o.APIGroup != "" {
		gk += "." + o.APIGroup
	}
	if o.Namespace != "" {
		return gk + " " + o.Namespace + "/" + o.Name
	}
	return gk + " " + o.Name
}

// Amount is an amount of a resource type.
type Amount struct {
	ResourceType string `json:"resourceType"`
	Amount       int64  `json:"amount"`
}

// Bucket is a bucket's numbers.
type Bucket struct {
	Name         string `json:"name"`
	ResourceType string `json:"resourceType"`
	Limit        int64  `json:"limit"`
	Allocated    int64  `json:"allocated"`
	Available    int64  `json:"available"`
}

// IsRefusal reports whether e refused something: refusals are kept before
// routine entries.
func (e Entry) IsRefusal() bool { return e.Event == ClaimDenied || e.Event == AdmissionRefused }

// Merge adds incoming to existing (each oldest first) and keeps at most
// limit entries: while there are too many, the oldest routine entry goes,
// and only when every entry is a refusal, the oldest refusal.
func Merge(existing, incoming []Entry, limit int) []Entry {
	all := append(slices.Clone(existing), incoming...)
	slices.SortStableFunc(all, func(a, b Entry) int { return a.Time.Compare(b.Time) })
	excess := len(all) - limit
	if excess <= 0 {
		return all
	}
	routine := 0
	for _, e := range all {
		if !e.IsRefusal() {
			routine++
		}
	}
	dropRoutine := min(excess, routine)
	dropRefusals := excess - dropRoutine
	out := all[:0]
	for _, e := range all {
		switch {
		case !e.IsRefusal() && dropRoutine > 0:
			dropRoutine--
		case e.IsRefusal() && dropRefusals > 0:
			dropRefusals--
		default:
			out = append(out, e)
		}
	}
	return out
}

// Consumer identifies whose history it is.
type Consumer struct {
	APIGroup, Kind, Namespace, Name string
}

func (c Consumer) String() string {
	return strings.Join([]string{c.APIGroup, c.Kind, c.Namespace, c.Name}, "/")
}

// ConfigMapName is the name of a consumer's history ConfigMap: readable,
// and unique by a hash of the whole identity.
func ConfigMapName(c Consumer) string {
	sum := sha256.Sum256([]byte(c.String()))
	readable := strings.ToLower(c.Kind + "-" + c.Name)
	readable = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, readable)
	if len(readable) > 36 {
		readable = readable[:36]
	}
	return fmt.Sprintf("quota-history-%s-%s", strings.Trim(readable, "-"), hex.EncodeToString(sum[:5]))
}

// Decode reads the entries of a history ConfigMap.
func Decode(cm *corev1.ConfigMap) ([]Entry, error) {
	raw, ok := cm.Data[DataKey]
	if !ok || raw == "" {
		return nil, nil
	}
	var out []Entry
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		return nil, fmt.Errorf("decision history %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return out, nil
}

// Encode writes entries into a history ConfigMap.
func Encode(cm *corev1.ConfigMap, entries []Entry) error {
	raw, err := json.Marshal(entries)
	if err != nil {
		return err
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[DataKey] = string(raw)
	return nil
}

// ConsumerOf reads whose history a ConfigMap holds.
func ConsumerOf(cm *corev1.ConfigMap) Consumer {
	parts := strings.SplitN(cm.Annotations[AnnotationConsumer], "/", 4)
	for len(parts) < 4 {
		parts = append(parts, "")
	}
	return Consumer{APIGroup: parts[0], Kind: parts[1], Namespace: parts[2], Name: parts[3]}
}
