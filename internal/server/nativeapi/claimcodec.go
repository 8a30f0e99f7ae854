package nativeapi

import (
	"bytes"
	"context"
	"fmt"
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
}

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
	return &ClaimCodec{codec: opts.StorageConfig.Codec, transformer: transformer,
		fields: managedfields.NewDeducedTypeConverter(), now: time.Now}, nil
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
	typed, err := cc.fields.ObjectToTyped(c)
	if err != nil {
		return nil, fmt.Errorf("the managed fields of a claim: %w", err)
	}
	all, err := typed.ToFieldSet()
	if err != nil {
		return nil, err
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
	at := metav1.NewTime(cc.now().UTC().Truncate(time.Second))
	var out []metav1.ManagedFieldsEntry
	for _, e := range []struct {
		set         *fieldpath.Set
		subresource string
	}{{mainSet, ""}, {status, "status"}} {
		if e.set.Empty() {
			continue
		}
		js, err := e.set.ToJSON()
		if err != nil {
			return nil, err
		}
		out = append(out, metav1.ManagedFieldsEntry{Manager: EngineManager, Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: quotav1alpha1.SchemeGroupVersion.String(), Time: &at, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: js}, Subresource: e.subresource})
	}
	return out, nil
}
