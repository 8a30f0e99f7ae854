package nativeapi

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage/value"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/fence"
)

// EngineManager is the field manager the engine's claims are recorded
// with in managedFields.
const EngineManager = "quotaplane-engine"

// ClaimCodec is how the engine's journal writes the claims admission
// granted: with the codec and the transformer the API server's storage
// uses for ResourceClaims (protobuf, and encryption at rest when it is
// configured), and with managedFields as an update by EngineManager
// records them. The journal still writes them in its fenced transactions
// (docs/exactly-once.md); only the bytes come from the storage layer.
type ClaimCodec struct {
	codec       runtime.Codec
	transformer value.Transformer
	fields      managedfields.TypeConverter
	now         func() time.Time

	mu sync.Mutex
	// sets are the managed fields' sets (object, status) computed before,
	// by claimShape; emptied when it reaches maxShapes.
	sets map[string][2][]byte
}

// maxShapes bounds the sets remembered: claims of a few policies have a
// few shapes; anything more varied is computed each time past the bound.
const maxShapes = 1024

var _ fence.ClaimCodec = &ClaimCodec{}

// NewClaimCodec reads the storage configuration of ResourceClaims from
// the API server's REST options.
func NewClaimCodec(getter generic.RESTOptionsGetter) (*ClaimCodec, error) {
	opts, err := getter.GetRESTOptions(quotav1alpha1.Resource("resourceclaims"), &quotav1alpha1.ResourceClaim{})
	if err != nil {
		return nil, fmt.Errorf("the storage of ResourceClaims: %w", err)
	}
	transformer := opts.StorageConfig.Transformer
	if transformer == nil { // no encryption at rest configured: as the storage does
		transformer = identity.NewEncryptCheckTransformer()
	}
	return newClaimCodec(opts.StorageConfig.Codec, transformer), nil
}

func newClaimCodec(codec runtime.Codec, transformer value.Transformer) *ClaimCodec {
	return &ClaimCodec{codec: codec, transformer: transformer,
		fields: managedfields.NewDeducedTypeConverter(), now: time.Now, sets: map[string][2][]byte{}}
}

// Encode is c as the storage layer stores it at key.
func (cc *ClaimCodec) Encode(ctx context.Context, key string, c *quotav1alpha1.ResourceClaim) ([]byte, error) {
	c = c.DeepCopy()
	managed, err := cc.managedFields(c)
	if err != nil {
		return nil, err
	}
	c.ManagedFields = managed
	var buf bytes.Buffer
	if err := cc.codec.Encode(c, &buf); err != nil {
		return nil, err
	}
	return cc.transformer.TransformToStorage(ctx, buf.Bytes(), value.DefaultContext(key))
}

// Decode reads a claim stored at key.
func (cc *ClaimCodec) Decode(ctx context.Context, key string, data []byte) (*quotav1alpha1.ResourceClaim, error) {
	plain, _, err := cc.transformer.TransformFromStorage(ctx, data, value.DefaultContext(key))
	if err != nil {
		return nil, err
	}
	out := &quotav1alpha1.ResourceClaim{}
	obj, _, err := cc.codec.Decode(plain, nil, out)
	if err != nil {
		return nil, err
	}
	c, ok := obj.(*quotav1alpha1.ResourceClaim)
	if !ok {
		return nil, fmt.Errorf("%s holds a %T, not a ResourceClaim", key, obj)
	}
	return c, nil
}

// metadataNotManaged are the fields the API server never records as
// managed.
var metadataNotManaged = fieldpath.NewSet(
	fieldpath.MakePathOrDie("apiVersion"), fieldpath.MakePathOrDie("kind"),
	fieldpath.MakePathOrDie("metadata", "name"), fieldpath.MakePathOrDie("metadata", "namespace"),
	fieldpath.MakePathOrDie("metadata", "uid"), fieldpath.MakePathOrDie("metadata", "creationTimestamp"),
	fieldpath.MakePathOrDie("metadata", "resourceVersion"), fieldpath.MakePathOrDie("metadata", "generation"),
	fieldpath.MakePathOrDie("metadata", "managedFields"), fieldpath.MakePathOrDie("metadata", "selfLink"),
)

// managedFields are c's fields as the engine's two writes of a claim
// through the API would record them: the object, then its status.
func (cc *ClaimCodec) managedFields(c *quotav1alpha1.ResourceClaim) ([]metav1.ManagedFieldsEntry, error) {
	sets, err := cc.fieldSets(c)
	if err != nil {
		return nil, err
	}
	at := metav1.NewTime(cc.now().UTC().Truncate(time.Second))
	var out []metav1.ManagedFieldsEntry
	for i, subresource := range []string{"", "status"} {
		if sets[i] == nil {
			continue
		}
		out = append(out, metav1.ManagedFieldsEntry{Manager: EngineManager, Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: quotav1alpha1.SchemeGroupVersion.String(), Time: &at, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: sets[i]}, Subresource: subresource})
	}
	return out, nil
}

// fieldSets are the JSON of c's managed fields, the object's and the
// status's (nil when empty): remembered by c's shape, else computed.
func (cc *ClaimCodec) fieldSets(c *quotav1alpha1.ResourceClaim) ([2][]byte, error) {
	shape, ok := claimShape(c)
	if ok {
		cc.mu.Lock()
		sets, known := cc.sets[shape]
		cc.mu.Unlock()
		if known {
			return sets, nil
		}
	}
	sets, err := cc.computeFieldSets(c)
	if err != nil || !ok {
		return sets, err
	}
	cc.mu.Lock()
	if len(cc.sets) >= maxShapes {
		clear(cc.sets)
	}
	cc.sets[shape] = sets
	cc.mu.Unlock()
	return sets, nil
}

// computeFieldSets derives c's sets with structured-merge-diff's deduced
// type, as the API server's field manager does for a kind without a schema.
func (cc *ClaimCodec) computeFieldSets(c *quotav1alpha1.ResourceClaim) ([2][]byte, error) {
	var out [2][]byte
	typed, err := cc.fields.ObjectToTyped(c)
	if err != nil {
		return out, fmt.Errorf("the managed fields of a claim: %w", err)
	}
	all, err := typed.ToFieldSet()
	if err != nil {
		return out, err
	}
	all = all.Difference(metadataNotManaged)
	mainSet, status := fieldpath.NewSet(), fieldpath.NewSet()
	all.Iterate(func(p fieldpath.Path) {
		if len(p) > 0 && p[0].FieldName != nil && *p[0].FieldName == "status" {
			status.Insert(p)
		} else {
			mainSet.Insert(p)
		}
	})
	for i, set := range []*fieldpath.Set{mainSet, status} {
		if set.Empty() {
			continue
		}
		if out[i], err = set.ToJSON(); err != nil {
			return out, err
		}
	}
	return out, nil
}

// claimShape is what of c decides its managed fields' sets. The deduced
// type is granular in maps (each key a field of its own) and atomic in lists,
// so the sets depend only on which fields are present and on the keys of
// the labels and annotations: the shape records those keys and, for every
// other field, whether it is set (finer than needed where a field is always
// present; never coarser). ok is false for metadata the engine never writes
// (a deletion, generateName, managed fields): such a claim's sets are
// computed. TestClaimShape keeps this in step with the types.
func claimShape(c *quotav1alpha1.ResourceClaim) (shape string, ok bool) {
	m := &c.ObjectMeta
	if m.GenerateName != "" || m.SelfLink != "" || m.DeletionTimestamp != nil || m.DeletionGracePeriodSeconds != nil ||
		len(m.ManagedFields) > 0 || c.APIVersion != "" || c.Kind != "" {
		return "", false
	}
	var b strings.Builder
	keys := func(m map[string]string) {
		b.WriteString(strconv.Itoa(len(m)))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			b.WriteString(strconv.Itoa(len(k)))
			b.WriteByte(':')
			b.WriteString(k)
		}
		b.WriteByte('|')
	}
	keys(m.Labels)
	keys(m.Annotations)
	bit := func(set bool) {
		if set {
			b.WriteByte('1')
		} else {
			b.WriteByte('0')
		}
	}
	bit(len(m.OwnerReferences) > 0)
	bit(len(m.Finalizers) > 0)
	cr := c.Spec.ConsumerRef
	bit(cr.APIGroup != "")
	bit(cr.Kind != "")
	bit(cr.Name != "")
	bit(cr.Namespace != "")
	bit(c.Spec.Requests != nil)
	bit(len(c.Spec.Requests) > 0)
	r := c.Spec.ResourceRef
	bit(r != nil)
	if r != nil {
		bit(r.APIGroup != "")
		bit(r.Kind != "")
		bit(r.Name != "")
		bit(r.Namespace != "")
	}
	st := &c.Status
	bit(st.ObservedGeneration != 0)
	bit(st.Conditions != nil)
	bit(len(st.Conditions) > 0)
	bit(st.Allocations != nil)
	bit(len(st.Allocations) > 0)
	bit(st.DecisionSeal != "")
	return b.String(), true
}
