package kinds

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func crd(versions ...map[string]any) *unstructured.Unstructured {
	var vs []any
	for _, v := range versions {
		vs = append(vs, v)
	}
	return &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"versions": vs}}}
}

func version(name string, served, storage bool) map[string]any {
	return map[string]any{"name": name, "served": served, "storage": storage}
}

// TestResolve: an object recorded at a version no longer served is read at
// one that is; a resource serving none is not "gone".
func TestResolve(t *testing.T) {
	widgets := schema.GroupVersionResource{Group: "adv.example.com", Version: "v1", Resource: "widgets"}
	cases := map[string]struct {
		recorded    schema.GroupVersionResource
		crd         *unstructured.Unstructured // nil: no CRD
		wantVersion string
		wantErr     error
	}{
		"built in":                 {recorded: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, wantVersion: "v1"},
		"no CRD: as recorded":      {recorded: widgets, wantVersion: "v1"},
		"still served":             {recorded: widgets, crd: crd(version("v1", true, true), version("v2", true, false)), wantVersion: "v1"},
		"unserved: the storage":    {recorded: widgets, crd: crd(version("v1", false, false), version("v2", true, true)), wantVersion: "v2"},
		"unserved: the first":      {recorded: widgets, crd: crd(version("v1", false, true), version("v3", true, false), version("v2", true, false)), wantVersion: "v3"},
		"nothing served: not gone": {recorded: widgets, crd: crd(version("v1", false, true)), wantVersion: "v1", wantErr: ErrNotServed},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := &Resolver{now: time.Now, known: map[schema.GroupResource]definition{}, crd: func(context.Context, string) (*unstructured.Unstructured, error) {
				if tc.crd == nil {
					return nil, apierrors.NewNotFound(crdResource().GroupResource(), "x")
				}
				return tc.crd, nil
			}}
			got, err := r.Resolve(context.Background(), tc.recorded)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v; want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantVersion, got.Version); diff != "" {
				t.Errorf("version (-want +got):\n%s", diff)
			}
		})
	}
}

// TestACachedDefinitionIsReadAgainBeforeAnotherVersionIsChosen: a version
// unserved since the cache was filled is seen at once.
func TestACachedDefinitionIsReadAgainBeforeAnotherVersionIsChosen(t *testing.T) {
	current := crd(version("v1", true, true))
	reads := 0
	r := &Resolver{now: time.Now, known: map[schema.GroupResource]definition{}, crd: func(context.Context, string) (*unstructured.Unstructured, error) {
		reads++
		return current, nil
	}}
	w := schema.GroupVersionResource{Group: "adv.example.com", Version: "v1", Resource: "widgets"}
	if got, _ := r.Resolve(context.Background(), w); got.Version != "v1" || reads != 1 {
		t.Fatalf("v1 served: got %s after %d reads", got.Version, reads)
	}
	if _, _ = r.Resolve(context.Background(), w); reads != 1 {
		t.Fatalf("a served version within the cache period was read again (%d reads)", reads)
	}
	current = crd(version("v1", false, false), version("v2", true, true))
	// The cache says v1 is served: recorded stays v1 until the cache ages
	// out; the lookup of the object at v1 then fails and the caller asks
	// again. With the cache aged out, v2 at once.
	r.now = func() time.Time { return time.Now().Add(time.Minute) }
	if got, _ := r.Resolve(context.Background(), w); got.Version != "v2" {
		t.Errorf("after v1 was unserved: %s; want v2", got.Version)
	}
}

// TestReadDoesNotBelieveAStaleNotFound: a version unserved since it was
// cached answers NotFound; Read asks again at the served version before
// NotFound is believed.
func TestReadDoesNotBelieveAStaleNotFound(t *testing.T) {
	current := crd(version("v1", true, true))
	r := &Resolver{now: time.Now, known: map[schema.GroupResource]definition{}, crd: func(context.Context, string) (*unstructured.Unstructured, error) {
		return current, nil
	}}
	w := schema.GroupVersionResource{Group: "adv.example.com", Version: "v1", Resource: "widgets"}
	_, _ = r.Resolve(context.Background(), w) // cached: v1 served
	current = crd(version("v1", false, false), version("v2", true, true))
	var tried []string
	err := r.Read(context.Background(), w, func(gvr schema.GroupVersionResource) error {
		tried = append(tried, gvr.Version)
		if gvr.Version == "v1" {
			return apierrors.NewNotFound(gvr.GroupResource(), "w") // v1 is not served any more
		}
		return nil
	})
	if err != nil || !cmp.Equal([]string{"v1", "v2"}, tried) {
		t.Errorf("read at %v, err %v; want v1 then v2, no error", tried, err)
	}
}
