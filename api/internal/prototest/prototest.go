package prototest

import (
	"encoding/json"
	"math/rand"
	"reflect"
	"sort"
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/diff"
)

// Object is what the generated protobuf code gives every kind, and what
// k8s.io/apimachinery/pkg/runtime/serializer/protobuf needs of it.
type Object interface {
	runtime.Object
	Marshal() ([]byte, error)
	MarshalToSizedBuffer([]byte) (int, error)
	Size() int
	Reset()
	Unmarshal([]byte) error
}

const (
	fuzzSeed = 20260101
	// Iterations per kind with every pointer, slice and map filled, then
	// with the fuzzer's defaults (half of them nil or empty).
	fullIterations    = 20
	defaultIterations = 20
)

// KindsAreRegistered keeps kinds in step with the kinds of gv in scheme.
func KindsAreRegistered(t *testing.T, scheme *runtime.Scheme, gv schema.GroupVersion, kinds []Object) {
	t.Helper()
	pkg := reflect.TypeOf(kinds[0]).Elem().PkgPath()
	want := map[string]bool{}
	for kind, typ := range scheme.KnownTypes(gv) {
		if typ.PkgPath() == pkg {
			want[kind] = true
		}
	}
	got := map[string]bool{}
	for _, obj := range kinds {
		got[reflect.TypeOf(obj).Elem().Name()] = true
	}
	if d := diff.Diff(want, got); d != "" {
		t.Errorf("the kinds tested differ from the kinds in the scheme (-scheme +tested):\n%s", d)
	}
}

// RoundTrip fills every kind with random values, marshals it with the
// generated code, unmarshals it into a fresh object and into a reused one
// (Reset first, as the protobuf serializer does), and checks that nothing
// was lost. It also checks that every field of every type of the package
// was non-zero in at least one of the objects, so that no field escapes.
// Fields tagged protobuf:"-" are never serialized and are left zero.
func RoundTrip(t *testing.T, scheme *runtime.Scheme, kinds []Object) {
	codecs := serializer.NewCodecFactory(scheme)
	for _, kind := range kinds {
		typ := reflect.TypeOf(kind).Elem()
		pkg := typ.PkgPath()
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
				obj := reflect.New(typ).Interface().(Object)
				f.Fill(obj)
				fillNilTimes(reflect.ValueOf(obj), pkg, r, nilChance)
				recordNonZero(reflect.ValueOf(obj).Elem(), pkg, typ.Name(), seen)

				data, err := obj.Marshal()
				if err != nil {
					t.Fatalf("iteration %d: Marshal: %v", i, err)
				}
				if len(data) != obj.Size() {
					t.Fatalf("iteration %d: Marshal wrote %d bytes, Size says %d", i, len(data), obj.Size())
				}
				fresh := reflect.New(typ).Interface().(Object)
				if err := fresh.Unmarshal(data); err != nil {
					t.Fatalf("iteration %d: Unmarshal: %v", i, err)
				}
				if !equality.Semantic.DeepEqual(obj, fresh) {
					t.Fatalf("iteration %d: round trip changed the object (-want +got):\n%s", i, diff.Diff(obj, fresh))
				}
				reused := reflect.New(typ).Interface().(Object)
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

// Serializer encodes and decodes every kind through the protobuf
// serializer of a codec factory, as an API server or a client with content
// type application/vnd.kubernetes.protobuf does.
func Serializer(t *testing.T, scheme *runtime.Scheme, gv schema.GroupVersion, kinds []Object) {
	codecs := serializer.NewCodecFactory(scheme)
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	codec := codecs.CodecForVersions(info.Serializer, info.Serializer, gv, gv)
	f := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(fuzzSeed), codecs).NilChance(0).NumElements(1, 2)
	for _, kind := range kinds {
		typ := reflect.TypeOf(kind).Elem()
		obj := reflect.New(typ).Interface().(Object)
		f.Fill(obj)
		fillNilTimes(reflect.ValueOf(obj), typ.PkgPath(), rand.New(rand.NewSource(fuzzSeed)), 1) // clears what is never serialized
		data, err := runtime.Encode(codec, obj)
		if err != nil {
			t.Fatalf("%s: encode: %v", typ.Name(), err)
		}
		decoded, err := runtime.Decode(codec, data)
		if err != nil {
			t.Fatalf("%s: decode: %v", typ.Name(), err)
		}
		if gvk := decoded.GetObjectKind().GroupVersionKind(); gvk != gv.WithKind(typ.Name()) {
			t.Errorf("%s: decoded object has kind %v", typ.Name(), gvk)
		}
		decoded.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
		if !equality.Semantic.DeepEqual(obj, decoded) {
			t.Errorf("%s: serializer round trip changed the object (-want +got):\n%s", typ.Name(), diff.Diff(obj, decoded))
		}
	}
}

// fillNilTimes sets the nil *metav1.Time fields of the structs of pkg
// reachable from v to random times, each with probability 1-nilChance, and
// clears the fields never serialized. randfill leaves the times nil: it
// calls metav1.Time's RandFill on the nil pointer, which returns without
// allocating.
func fillNilTimes(v reflect.Value, pkg string, r *rand.Rand, nilChance float64) {
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
		fillNilTimes(v.Elem(), pkg, r, nilChance)
	case reflect.Slice:
		for i := range v.Len() {
			fillNilTimes(v.Index(i), pkg, r, nilChance)
		}
	case reflect.Struct:
		if v.Type().PkgPath() != pkg {
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).Tag.Get("protobuf") == "-" {
				v.Field(i).SetZero() // never serialized (AmountQuantity)
				continue
			}
			fillNilTimes(v.Field(i), pkg, r, nilChance)
		}
	}
}

// recordNonZero notes in seen, for every field of every struct of pkg
// reachable from v, whether it holds a non-zero value. Types of other
// packages (ObjectMeta, Condition, Quantity, ...) are leaves. TypeMeta is
// skipped: protobuf carries apiVersion and kind in the envelope the
// serializer writes, not in the message.
func recordNonZero(v reflect.Value, pkg, path string, seen map[string]bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			recordNonZero(v.Elem(), pkg, path, seen)
		}
	case reflect.Slice:
		for i := range v.Len() {
			recordNonZero(v.Index(i), pkg, path+"[]", seen)
		}
	case reflect.Struct:
		if v.Type().PkgPath() != pkg {
			return
		}
		for i := range v.NumField() {
			field := v.Type().Field(i)
			if field.Type == reflect.TypeFor[metav1.TypeMeta]() || field.Tag.Get("protobuf") == "-" {
				continue
			}
			p := path + "." + field.Name
			seen[p] = seen[p] || !v.Field(i).IsZero()
			recordNonZero(v.Field(i), pkg, p, seen)
		}
	}
}

// JSONUnchanged checks that obj, hand-filled, still serializes to want —
// the JSON its type produced before it had protobuf tags — and that it
// round-trips through protobuf too.
func JSONUnchanged(t *testing.T, obj Object, want string) {
	t.Helper()
	got, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%T: JSON changed:\n got %s\nwant %s", obj, got, want)
	}
	data, err := obj.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	out := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(Object)
	if err := out.Unmarshal(data); err != nil {
		t.Fatal(err)
	}
	out.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	if !equality.Semantic.DeepEqual(obj, out) {
		t.Errorf("%T: protobuf round trip changed the object (-want +got):\n%s", obj, diff.Diff(obj, out))
	}
}
