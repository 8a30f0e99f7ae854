package nativeapi

import (
	"bytes"
	"encoding/json"
	"errors"

	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// schemaErrors is the API server's serializer for the native groups, with
// one change: a body that does not decode into the Go type (a string where
// a list goes) is explained by the kind's schema, on the field at fault, as
// the CRD server explains it, instead of by Go's JSON decoder.
type schemaErrors struct {
	runtime.NegotiatedSerializer
}

func (s schemaErrors) DecoderToVersion(d runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	return schemaDecoder{Decoder: s.NegotiatedSerializer.DecoderToVersion(d, gv)}
}

type schemaDecoder struct {
	runtime.Decoder
}

func (d schemaDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	obj, gvk, err := d.Decoder.Decode(data, defaults, into)
	if err == nil {
		if zeros := droppedZeros(data); zeros != nil {
			return obj, gvk, zeros
		}
		return obj, gvk, nil
	}
	if runtime.IsStrictDecodingError(err) {
		return obj, gvk, err
	}
	if explained := explain(data); explained != nil {
		return obj, gvk, explained
	}
	return obj, gvk, err
}

// explain validates data, a JSON object of a native kind, against the
// kind's schema; nil when data is not one or the schema finds nothing.
func explain(data []byte) error {
	m, k := nativeObject(data)
	if k == nil {
		return nil
	}
	errs := apiservervalidation.ValidateCustomResource(nil, m, k.validator)
	if len(errs) == 0 {
		return nil
	}
	return errors.New(errs.ToAggregate().Error())
}

// droppedZeros refuses, as the CRD server does, a body that writes a zero
// the schema forbids (unitConversionFactor: 0 against a minimum of 1) in a
// field the Go type leaves out when zero (omitempty): decoded, the zero
// reads as unset, and the strategy's validation, which sees the typed
// object, would accept it. Only zeros are judged here; every other value
// reaches the strategy as written. nil when data is not a native kind's
// JSON or writes no such zero.
func droppedZeros(data []byte) error {
	if len(data) == 0 || data[0] != '{' || !mayForbidZero(data) {
		return nil
	}
	m, k := nativeObject(data)
	if k == nil || !k.zeroForbidden {
		return nil
	}
	var zeros field.ErrorList
	for _, e := range apiservervalidation.ValidateCustomResource(nil, m, k.validator) {
		if isZero(e.BadValue) {
			zeros = append(zeros, e)
		}
	}
	if len(zeros) == 0 {
		return nil
	}
	name, _, _ := unstructured.NestedString(m, "metadata", "name")
	return apierrors.NewInvalid(k.GVK.GroupKind(), name, zeros)
}

// mayForbidZero is a cheap look at data before it is parsed: does it name a
// kind whose schema forbids a zero somewhere?
func mayForbidZero(data []byte) bool {
	ks, err := Kinds()
	if err != nil {
		return false
	}
	for _, k := range ks {
		if k.zeroForbidden && bytes.Contains(data, []byte(`"`+k.GVK.Kind+`"`)) {
			return true
		}
	}
	return false
}

func isZero(v any) bool {
	switch n := v.(type) {
	case int64:
		return n == 0
	case float64:
		return n == 0
	case json.Number:
		f, err := n.Float64()
		return err == nil && f == 0
	}
	return false
}

// nativeObject is data as a JSON object and its native kind; nil when it is
// not one.
func nativeObject(data []byte) (map[string]any, *Kind) {
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		return nil, nil
	}
	apiVersion, _ := m["apiVersion"].(string)
	kind, _ := m["kind"].(string)
	ks, err := Kinds()
	if err != nil {
		return nil, nil
	}
	for _, k := range ks {
		if k.GVK.GroupVersion().String() == apiVersion && k.GVK.Kind == kind {
			return m, k
		}
	}
	return nil, nil
}
