package nativeapi

import (
	"encoding/json"
	"errors"

	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	if err == nil || runtime.IsStrictDecodingError(err) {
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
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		return nil
	}
	apiVersion, _ := m["apiVersion"].(string)
	kind, _ := m["kind"].(string)
	ks, err := Kinds()
	if err != nil {
		return nil
	}
	for _, k := range ks {
		if k.GVK.GroupVersion().String() != apiVersion || k.GVK.Kind != kind {
			continue
		}
		errs := apiservervalidation.ValidateCustomResource(nil, m, k.validator)
		if len(errs) == 0 {
			return nil
		}
		return errors.New(errs.ToAggregate().Error())
	}
	return nil
}
