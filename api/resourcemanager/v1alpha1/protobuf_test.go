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
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/diff"

	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
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
	&rmv1alpha1.Organization{}, &rmv1alpha1.OrganizationList{},
	&rmv1alpha1.Project{}, &rmv1alpha1.ProjectList{},
}

// apiPkgPath is the import path of the package under test.
var apiPkgPath = reflect.TypeFor[rmv1alpha1.Project]().PkgPath()

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
	if err := rmv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

// TestProtoKindsAreRegistered keeps protoKinds in step with the scheme.
func TestProtoKindsAreRegistered(t *testing.T) {
	scheme := newScheme(t)
	want := map[string]bool{}
	for kind, typ := range scheme.KnownTypes(rmv1alpha1.SchemeGroupVersion) {
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
			fillNilTimes(v.Field(i), r, nilChance)
		}
	}
}

// recordNonZero notes in seen, for every field of every struct of this
// package reachable from v, whether it holds a non-zero value. Types of
// other packages (ObjectMeta, Condition, ...) are leaves. TypeMeta
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
			if field.Type == reflect.TypeFor[metav1.TypeMeta]() {
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
	codec := codecs.CodecForVersions(info.Serializer, info.Serializer, rmv1alpha1.SchemeGroupVersion, rmv1alpha1.SchemeGroupVersion)
	f := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(fuzzSeed), codecs).NilChance(0).NumElements(1, 2)
	for _, kind := range protoKinds {
		typ := reflect.TypeOf(kind).Elem()
		obj := reflect.New(typ).Interface().(protoObject)
		f.Fill(obj)
		data, err := runtime.Encode(codec, obj)
		if err != nil {
			t.Fatalf("%s: encode: %v", typ.Name(), err)
		}
		decoded, err := runtime.Decode(codec, data)
		if err != nil {
			t.Fatalf("%s: decode: %v", typ.Name(), err)
		}
		if gvk := decoded.GetObjectKind().GroupVersionKind(); gvk != rmv1alpha1.SchemeGroupVersion.WithKind(typ.Name()) {
			t.Errorf("%s: decoded object has kind %v", typ.Name(), gvk)
		}
		decoded.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
		if !equality.Semantic.DeepEqual(obj, decoded) {
			t.Errorf("%s: serializer round trip changed the object (-want +got):\n%s", typ.Name(), diff.Diff(obj, decoded))
		}
	}
}

// sampleOrganization and sampleProject are hand-filled objects.
func sampleOrganization() *rmv1alpha1.Organization {
	at := metav1.NewTime(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	return &rmv1alpha1.Organization{
		TypeMeta:   metav1.TypeMeta{APIVersion: rmv1alpha1.SchemeGroupVersion.String(), Kind: "Organization"},
		ObjectMeta: metav1.ObjectMeta{Name: "acme", UID: "5f0c1d1e-0000-4000-8000-000000000001", Generation: 1, CreationTimestamp: at},
		Spec:       rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard},
		Status: rmv1alpha1.OrganizationStatus{
			ObservedGeneration: 1,
			Namespace:          "organization-acme",
			Conditions:         []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, ObservedGeneration: 1, LastTransitionTime: at, Reason: "Ready", Message: "namespace and owner binding exist"}},
		},
	}
}

func sampleProject() *rmv1alpha1.Project {
	return &rmv1alpha1.Project{
		TypeMeta:   metav1.TypeMeta{APIVersion: rmv1alpha1.SchemeGroupVersion.String(), Kind: "Project"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"resourcemanager.miloapis.com/organization-name": "acme"}},
		Spec:       rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Kind: rmv1alpha1.ProjectOwnerKindOrganization, Name: "acme"}},
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
		{sampleOrganization(), wantOrganizationJSON},
		{sampleProject(), wantProjectJSON},
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
	wantOrganizationJSON = `{"kind":"Organization","apiVersion":"resourcemanager.miloapis.com/v1alpha1","metadata":{"name":"acme","uid":"5f0c1d1e-0000-4000-8000-000000000001","generation":1,"creationTimestamp":"2026-03-04T05:06:07Z"},"spec":{"type":"Standard"},"status":{"observedGeneration":1,"namespace":"organization-acme","conditions":[{"type":"Ready","status":"True","observedGeneration":1,"lastTransitionTime":"2026-03-04T05:06:07Z","reason":"Ready","message":"namespace and owner binding exist"}]}}`
	wantProjectJSON      = `{"kind":"Project","apiVersion":"resourcemanager.miloapis.com/v1alpha1","metadata":{"name":"web","labels":{"resourcemanager.miloapis.com/organization-name":"acme"}},"spec":{"ownerRef":{"kind":"Organization","name":"acme"}},"status":{}}`
)
