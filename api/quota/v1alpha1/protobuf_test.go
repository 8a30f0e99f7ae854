package v1alpha1_test

import (
	"encoding/json"
	"math/rand"
	"reflect"
	"sort"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/intstr"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// protoObject is what the generated protobuf code gives every kind, and what
// k8s.io/apimachinery/pkg/runtime/serializer/protobuf needs of it.
type protoObject interface {
	runtime.Object
	Marshal() ([]byte, error)
	MarshalToSizedBuffer([]byte) (int, error)
	Size() int
	Reset()
	Unmarshal([]byte) error
}

// protoKinds are the kinds of the package: every one must round-trip.
var protoKinds = []protoObject{
	&quotav1alpha1.ResourceRegistration{}, &quotav1alpha1.ResourceRegistrationList{},
	&quotav1alpha1.ResourceGrant{}, &quotav1alpha1.ResourceGrantList{},
	&quotav1alpha1.ResourceClaim{}, &quotav1alpha1.ResourceClaimList{},
	&quotav1alpha1.AllowanceBucket{}, &quotav1alpha1.AllowanceBucketList{},
	&quotav1alpha1.ClaimCreationPolicy{}, &quotav1alpha1.ClaimCreationPolicyList{},
	&quotav1alpha1.GrantCreationPolicy{}, &quotav1alpha1.GrantCreationPolicyList{},
	&quotav1alpha1.QuotaRequest{}, &quotav1alpha1.QuotaRequestList{},
	&quotav1alpha1.QuotaApprovalRule{}, &quotav1alpha1.QuotaApprovalRuleList{},
}

// apiPkgPath is the import path of the package under test.
var apiPkgPath = reflect.TypeFor[quotav1alpha1.ResourceClaim]().PkgPath()

const (
	fuzzSeed = 20260101
	// Iterations per kind with every pointer, slice and map filled, then
	// with the fuzzer's defaults (half of them nil or empty).
	fullIterations    = 20
	defaultIterations = 20
)

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := quotav1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

// TestProtoKindsAreRegistered keeps protoKinds in step with the scheme.
func TestProtoKindsAreRegistered(t *testing.T) {
	scheme := newScheme(t)
	want := map[string]bool{}
	for kind, typ := range scheme.KnownTypes(quotav1alpha1.SchemeGroupVersion) {
		if typ.PkgPath() == apiPkgPath {
			want[kind] = true
		}
	}
	got := map[string]bool{}
	for _, obj := range protoKinds {
		got[reflect.TypeOf(obj).Elem().Name()] = true
	}
	if d := diff.Diff(want, got); d != "" {
		t.Errorf("protoKinds differ from the kinds in the scheme (-scheme +protoKinds):\n%s", d)
	}
}

// TestProtobufRoundTrip fills every kind with random values, marshals it with
// the generated code, unmarshals it into a fresh object and into a reused one
// (Reset first, as the protobuf serializer does), and checks that nothing was
// lost. It also checks that every field of every type of this package was
// non-zero in at least one of the objects, so that no field escapes the test.
func TestProtobufRoundTrip(t *testing.T) {
	scheme := newScheme(t)
	codecs := serializer.NewCodecFactory(scheme)
	for _, kind := range protoKinds {
		typ := reflect.TypeOf(kind).Elem()
		t.Run(typ.Name(), func(t *testing.T) {
			seen := map[string]bool{}
			f := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(fuzzSeed), codecs)
			r := rand.New(rand.NewSource(fuzzSeed))
			nilChance := 0.0
			for i := range fullIterations + defaultIterations {
				if i == 0 {
					f.NilChance(nilChance).NumElements(1, 2)
				} else if i == fullIterations {
					nilChance = .5
					f.NilChance(nilChance).NumElements(0, 2)
				}
				obj := reflect.New(typ).Interface().(protoObject)
				f.Fill(obj)
				fillNilTimes(reflect.ValueOf(obj), r, nilChance)
				recordNonZero(reflect.ValueOf(obj).Elem(), typ.Name(), seen)

				data, err := obj.Marshal()
				if err != nil {
					t.Fatalf("iteration %d: Marshal: %v", i, err)
				}
				if len(data) != obj.Size() {
					t.Fatalf("iteration %d: Marshal wrote %d bytes, Size says %d", i, len(data), obj.Size())
				}

				fresh := reflect.New(typ).Interface().(protoObject)
				if err := fresh.Unmarshal(data); err != nil {
					t.Fatalf("iteration %d: Unmarshal: %v", i, err)
				}
				if !equality.Semantic.DeepEqual(obj, fresh) {
					t.Fatalf("iteration %d: round trip changed the object (-want +got):\n%s", i, diff.Diff(obj, fresh))
				}

				reused := reflect.New(typ).Interface().(protoObject)
				f.Fill(reused)
				reused.Reset()
				if err := reused.Unmarshal(data); err != nil {
					t.Fatalf("iteration %d: Unmarshal after Reset: %v", i, err)
				}
				if !equality.Semantic.DeepEqual(obj, reused) {
					t.Fatalf("iteration %d: round trip into a reset object changed it (-want +got):\n%s", i, diff.Diff(obj, reused))
				}
			}
			var never []string
			for path, nonZero := range seen {
				if !nonZero {
					never = append(never, path)
				}
			}
			sort.Strings(never)
			for _, path := range never {
				t.Errorf("field %s was zero in every fuzzed object", path)
			}
		})
	}
}

// fillNilTimes sets the nil *metav1.Time fields of the structs of this
// package reachable from v to random times, each with probability
// 1-nilChance. randfill leaves them nil: it calls metav1.Time's RandFill on
// the nil pointer, which returns without allocating.
func fillNilTimes(v reflect.Value, r *rand.Rand, nilChance float64) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			if v.Type() == reflect.TypeFor[*metav1.Time]() && r.Float64() >= nilChance {
				// Whole seconds, as metav1.Time's own RandFill does.
				tm := metav1.Unix(r.Int63n(1000*365*24*60*60), 0)
				v.Set(reflect.ValueOf(&tm))
			}
			return
		}
		fillNilTimes(v.Elem(), r, nilChance)
	case reflect.Slice:
		for i := range v.Len() {
			fillNilTimes(v.Index(i), r, nilChance)
		}
	case reflect.Struct:
		if v.Type().PkgPath() != apiPkgPath {
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).Tag.Get("protobuf") == "-" {
				v.Field(i).SetZero() // never serialized (AmountQuantity)
				continue
			}
			fillNilTimes(v.Field(i), r, nilChance)
		}
	}
}

// recordNonZero notes in seen, for every field of every struct of this
// package reachable from v, whether it holds a non-zero value. Types of
// other packages (ObjectMeta, Condition, Quantity, ...) are leaves. TypeMeta
// is skipped: protobuf carries apiVersion and kind in the envelope the
// serializer writes, not in the message.
func recordNonZero(v reflect.Value, path string, seen map[string]bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			recordNonZero(v.Elem(), path, seen)
		}
	case reflect.Slice:
		for i := range v.Len() {
			recordNonZero(v.Index(i), path+"[]", seen)
		}
	case reflect.Struct:
		if v.Type().PkgPath() != apiPkgPath {
			return
		}
		for i := range v.NumField() {
			field := v.Type().Field(i)
			if field.Type == reflect.TypeFor[metav1.TypeMeta]() || field.Tag.Get("protobuf") == "-" {
				continue
			}
			p := path + "." + field.Name
			seen[p] = seen[p] || !v.Field(i).IsZero()
			recordNonZero(v.Field(i), p, seen)
		}
	}
}

// TestProtobufSerializer encodes and decodes every kind through the protobuf
// serializer of a codec factory, as an API server or a client with
// content type application/vnd.kubernetes.protobuf does.
func TestProtobufSerializer(t *testing.T) {
	scheme := newScheme(t)
	codecs := serializer.NewCodecFactory(scheme)
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	codec := codecs.CodecForVersions(info.Serializer, info.Serializer, quotav1alpha1.SchemeGroupVersion, quotav1alpha1.SchemeGroupVersion)
	f := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(fuzzSeed), codecs).NilChance(0).NumElements(1, 2)
	for _, kind := range protoKinds {
		typ := reflect.TypeOf(kind).Elem()
		obj := reflect.New(typ).Interface().(protoObject)
		f.Fill(obj)
		fillNilTimes(reflect.ValueOf(obj), rand.New(rand.NewSource(fuzzSeed)), 1) // clears what is never serialized
		data, err := runtime.Encode(codec, obj)
		if err != nil {
			t.Fatalf("%s: encode: %v", typ.Name(), err)
		}
		decoded, err := runtime.Decode(codec, data)
		if err != nil {
			t.Fatalf("%s: decode: %v", typ.Name(), err)
		}
		if gvk := decoded.GetObjectKind().GroupVersionKind(); gvk != quotav1alpha1.SchemeGroupVersion.WithKind(typ.Name()) {
			t.Errorf("%s: decoded object has kind %v", typ.Name(), gvk)
		}
		decoded.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
		if !equality.Semantic.DeepEqual(obj, decoded) {
			t.Errorf("%s: serializer round trip changed the object (-want +got):\n%s", typ.Name(), diff.Diff(obj, decoded))
		}
	}
}

// sampleClaimCreationPolicy is a hand-filled object: an embedded inline
// status, an int-or-string, maps, omitzero and optional pointers.
func sampleClaimCreationPolicy() *quotav1alpha1.ClaimCreationPolicy {
	at := metav1.NewTime(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	target := quotav1alpha1.ClaimTarget{ResourceClaimTemplate: quotav1alpha1.ResourceClaimTemplate{
		Metadata: quotav1alpha1.TemplateMetadata{
			Name: "claim-{{ trigger.metadata.name }}", GenerateName: "claim-", Namespace: "{{ trigger.metadata.namespace }}",
			Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"},
		},
		Spec: quotav1alpha1.ResourceClaimTemplateSpec{
			ConsumerRef: quotav1alpha1.TemplateConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Project", Name: "{{ trigger.metadata.name }}", Namespace: "ns"},
			Requests: []quotav1alpha1.ClaimTemplateRequest{
				{ResourceType: "compute.example.com/cpus", Amount: intstr.FromString("{{ trigger.spec.cpu }}"), Dimensions: []quotav1alpha1.TemplateDimension{{Key: "example.com/location", Value: "dfw"}}},
				{ResourceType: "compute.example.com/instances", Amount: intstr.FromInt32(1)},
			},
		},
	}}
	trigger := quotav1alpha1.Trigger{
		Resource:    quotav1alpha1.TriggerResource{APIVersion: "compute.example.com/v1", Kind: "Instance"},
		Constraints: []quotav1alpha1.Constraint{{Expression: "true", Message: "always"}},
	}
	return &quotav1alpha1.ClaimCreationPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: quotav1alpha1.SchemeGroupVersion.String(), Kind: "ClaimCreationPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: "instances", Generation: 3, Labels: map[string]string{"team": "compute"}, CreationTimestamp: at},
		Spec:       quotav1alpha1.ClaimCreationPolicySpec{Trigger: trigger, Target: target, Disabled: true, FailurePolicy: quotav1alpha1.FailurePolicy("Fail")},
		Status: quotav1alpha1.ClaimCreationPolicyStatus{
			PolicyStatus: quotav1alpha1.PolicyStatus{ObservedGeneration: 3, Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, ObservedGeneration: 3, LastTransitionTime: at, Reason: "Valid", Message: "ok"}}},
			Enforced:     &quotav1alpha1.EnforcedClaimPolicy{Generation: 2, Trigger: trigger, Target: target, FailurePolicy: quotav1alpha1.FailurePolicy("Ignore")},
			ExistingObjects: &quotav1alpha1.ExistingObjectsStatus{
				Generation: 2, Request: "r1", Objects: 10, Charged: 8, OverLimit: 1, NotCharged: 2, Message: "done", CompletionTime: &at,
			},
		},
	}
}

// sampleResourceRegistration is a hand-filled object with a quantity and a
// status left empty (omitempty of a struct).
func sampleResourceRegistration() *quotav1alpha1.ResourceRegistration {
	q := resource.MustParse("1Mi")
	return &quotav1alpha1.ResourceRegistration{
		TypeMeta:   metav1.TypeMeta{APIVersion: quotav1alpha1.SchemeGroupVersion.String(), Kind: "ResourceRegistration"},
		ObjectMeta: metav1.ObjectMeta{Name: "memory"},
		Spec: quotav1alpha1.ResourceRegistrationSpec{
			ConsumerType:         quotav1alpha1.ConsumerTypeRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization"},
			ParentConsumerTypes:  []quotav1alpha1.ConsumerTypeRef{{Kind: "Tenant"}},
			Type:                 quotav1alpha1.RegistrationType("Allocation"),
			ResourceType:         "compute.example.com/memory",
			Description:          "memory",
			BaseUnit:             "MiB",
			DisplayUnit:          "GiB",
			UnitConversionFactor: 1024,
			BaseUnitQuantity:     &q,
			ClaimingResources:    []quotav1alpha1.ClaimingResource{{APIGroup: "compute.example.com", Kind: "Instance"}},
			Thresholds:           &quotav1alpha1.UtilizationThresholds{Warning: 70, Critical: 90},
		},
	}
}

// TestJSONUnchanged checks that the protobuf struct tags left the JSON form
// alone: the expected documents were produced by the types before the tags
// were added.
func TestJSONUnchanged(t *testing.T) {
	for _, tc := range []struct {
		obj  protoObject
		want string
	}{
		{sampleClaimCreationPolicy(), wantClaimCreationPolicyJSON},
		{sampleResourceRegistration(), wantResourceRegistrationJSON},
	} {
		got, err := json.Marshal(tc.obj)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("%T: JSON changed:\n got %s\nwant %s", tc.obj, got, tc.want)
		}

		// The hand-filled objects round-trip through protobuf too.
		data, err := tc.obj.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		out := reflect.New(reflect.TypeOf(tc.obj).Elem()).Interface().(protoObject)
		if err := out.Unmarshal(data); err != nil {
			t.Fatal(err)
		}
		out.GetObjectKind().SetGroupVersionKind(tc.obj.GetObjectKind().GroupVersionKind())
		if !equality.Semantic.DeepEqual(tc.obj, out) {
			t.Errorf("%T: protobuf round trip changed the object (-want +got):\n%s", tc.obj, diff.Diff(tc.obj, out))
		}
	}
}

// The JSON of the sample objects as the types produced it before they had
// protobuf tags.
const (
	wantClaimCreationPolicyJSON  = `{"kind":"ClaimCreationPolicy","apiVersion":"quota.miloapis.com/v1alpha1","metadata":{"name":"instances","generation":3,"creationTimestamp":"2026-03-04T05:06:07Z","labels":{"team":"compute"}},"spec":{"trigger":{"resource":{"apiVersion":"compute.example.com/v1","kind":"Instance"},"constraints":[{"expression":"true","message":"always"}]},"target":{"resourceClaimTemplate":{"metadata":{"name":"claim-{{ trigger.metadata.name }}","generateName":"claim-","namespace":"{{ trigger.metadata.namespace }}","labels":{"a":"b"},"annotations":{"c":"d"}},"spec":{"consumerRef":{"apiGroup":"resourcemanager.miloapis.com","kind":"Project","name":"{{ trigger.metadata.name }}","namespace":"ns"},"requests":[{"resourceType":"compute.example.com/cpus","amount":"{{ trigger.spec.cpu }}","dimensions":[{"key":"example.com/location","value":"dfw"}]},{"resourceType":"compute.example.com/instances","amount":1}]}}},"disabled":true,"failurePolicy":"Fail"},"status":{"observedGeneration":3,"conditions":[{"type":"Ready","status":"True","observedGeneration":3,"lastTransitionTime":"2026-03-04T05:06:07Z","reason":"Valid","message":"ok"}],"enforced":{"generation":2,"trigger":{"resource":{"apiVersion":"compute.example.com/v1","kind":"Instance"},"constraints":[{"expression":"true","message":"always"}]},"target":{"resourceClaimTemplate":{"metadata":{"name":"claim-{{ trigger.metadata.name }}","generateName":"claim-","namespace":"{{ trigger.metadata.namespace }}","labels":{"a":"b"},"annotations":{"c":"d"}},"spec":{"consumerRef":{"apiGroup":"resourcemanager.miloapis.com","kind":"Project","name":"{{ trigger.metadata.name }}","namespace":"ns"},"requests":[{"resourceType":"compute.example.com/cpus","amount":"{{ trigger.spec.cpu }}","dimensions":[{"key":"example.com/location","value":"dfw"}]},{"resourceType":"compute.example.com/instances","amount":1}]}}},"failurePolicy":"Ignore"},"existingObjects":{"generation":2,"request":"r1","objects":10,"charged":8,"overLimit":1,"notCharged":2,"message":"done","completionTime":"2026-03-04T05:06:07Z"}}}`
	wantResourceRegistrationJSON = `{"kind":"ResourceRegistration","apiVersion":"quota.miloapis.com/v1alpha1","metadata":{"name":"memory"},"spec":{"consumerType":{"apiGroup":"resourcemanager.miloapis.com","kind":"Organization"},"parentConsumerTypes":[{"kind":"Tenant"}],"type":"Allocation","resourceType":"compute.example.com/memory","description":"memory","baseUnit":"MiB","displayUnit":"GiB","unitConversionFactor":1024,"baseUnitQuantity":"1Mi","claimingResources":[{"apiGroup":"compute.example.com","kind":"Instance"}],"thresholds":{"warning":70,"critical":90}},"status":{}}`
)
