package fence

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
)

// SealSecretName is the Secret, in the system namespace, holding the key
// the engine seals its Granted decisions with.
const SealSecretName = "quotaplane-decision-seal"

const sealKeyField = "key"

// Sealer signs the Granted decisions the engine writes, so that a new leader
// restores as granted only claims an engine decided: a Granted status
// written by anyone else (anyone allowed to write resourceclaims/status,
// with quotaplane controller on another cluster) carries no valid seal and
// is decided again, never counted as free quota.
type Sealer struct {
	key  []byte
	macs sync.Pool // of *sealState keyed with key
	// trustUnsealed is set for the one term that created the key: claims
	// granted before seals existed (an upgrade) are trusted once, and
	// sealed as their status is rewritten.
	trustUnsealed bool
}

// NewSealer seals with key (32 bytes or more).
func NewSealer(key []byte) *Sealer { return &Sealer{key: key} }

// LoadSealer reads the sealing key from the Secret SealSecretName in
// namespace, creating it on first use.
func LoadSealer(ctx context.Context, kube kubernetes.Interface, namespace string) (*Sealer, error) {
	secrets := kube.CoreV1().Secrets(namespace)
	s, err := secrets.Get(ctx, SealSecretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: SealSecretName, Namespace: namespace},
			Data: map[string][]byte{sealKeyField: key}}
		created, err := secrets.Create(ctx, s, metav1.CreateOptions{})
		if err == nil {
			return &Sealer{key: created.Data[sealKeyField], trustUnsealed: true}, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating the decision seal key %s/%s: %w", namespace, SealSecretName, err)
		}
		s, err = secrets.Get(ctx, SealSecretName, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("reading the decision seal key %s/%s: %w", namespace, SealSecretName, err)
	}
	key := s.Data[sealKeyField]
	if len(key) < 32 {
		return nil, fmt.Errorf("the decision seal key %s/%s holds %d bytes under %q, want 32; delete the Secret to have the engine make a new one",
			namespace, SealSecretName, len(key), sealKeyField)
	}
	return &Sealer{key: key}, nil
}

// Seal is the seal of a Granted decision on c.
func (s *Sealer) Seal(c *quotav1alpha1.ResourceClaim) string {
	var sum [sha256.Size]byte
	return base64.RawURLEncoding.EncodeToString(s.sum(c, sum[:0]))
}

// sum appends the HMAC of c's sealed fields to out: UID, consumer, then per
// request "type amount dims", newline-separated, then "Granted". The keyed
// hashes and their input buffers are pooled: making one costs more than the
// hashing, and a rebuild checks a million.
func (s *Sealer) sum(c *quotav1alpha1.ResourceClaim, out []byte) []byte {
	st, _ := s.macs.Get().(*sealState)
	if st == nil {
		st = &sealState{mac: hmac.New(sha256.New, s.key)}
	}
	defer s.macs.Put(st)
	b := append(st.buf[:0], c.UID...)
	b = append(b, '\n')
	b = append(b, convert.ConsumerID(c.Spec.ConsumerRef).String()...)
	for _, r := range c.Spec.Requests {
		b = append(b, '\n')
		b = append(b, r.ResourceType...)
		b = append(b, ' ')
		b = strconv.AppendInt(b, r.Amount, 10)
		b = append(b, ' ')
		b = append(b, convert.Dimensions(r.Dimensions).Key()...)
	}
	b = append(b, "\nGranted"...)
	st.buf = b
	st.mac.Reset()
	_, _ = st.mac.Write(b)
	return st.mac.Sum(out)
}

// sealState is one pooled keyed hash with its input buffer.
type sealState struct {
	mac hash.Hash
	buf []byte
}

// Trusted reports whether a claim's stored Granted status is one an engine
// decided.
func (s *Sealer) Trusted(c *quotav1alpha1.ResourceClaim) bool {
	if s.trustUnsealed && c.Status.DecisionSeal == "" {
		return true
	}
	var sum, got [sha256.Size]byte
	seal := c.Status.DecisionSeal
	if len(seal) != base64.RawURLEncoding.EncodedLen(len(got)) {
		return false
	}
	if n, err := base64.RawURLEncoding.Decode(got[:], []byte(seal)); err != nil || n != len(got) {
		return false
	}
	return hmac.Equal(got[:], s.sum(c, sum[:0]))
}
