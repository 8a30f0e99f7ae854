package triggerschema

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// served answers for the kinds in it and counts the questions.
type served struct {
	kinds map[schema.GroupVersionKind]*spec.Schema
	asked []string
}

func (s *served) ResolveSchema(gvk schema.GroupVersionKind) (*spec.Schema, error) {
	s.asked = append(s.asked, gvk.Kind)
	if sc, ok := s.kinds[gvk]; ok {
		return sc, nil
	}
	return nil, fmt.Errorf("%v: %w", gvk, resolver.ErrSchemaNotFound)
}

func TestResolverCachesForItsTTL(t *testing.T) {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	widget := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	s := &served{kinds: map[schema.GroupVersionKind]*spec.Schema{cm: spec.StringProperty()}}
	r := newResolver(s, time.Minute)
	now := time.Unix(0, 0)
	r.now = func() time.Time { return now }

	for range 2 {
		if _, err := r.Resolve("v1", "ConfigMap"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Resolve("example.com/v1", "Widget"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an unserved kind: %v", err)
	}
	// The CRD is installed: a not-found answer was not kept.
	s.kinds[widget] = spec.StringProperty()
	if _, err := r.Resolve("example.com/v1", "Widget"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute)
	if _, err := r.Resolve("v1", "ConfigMap"); err != nil {
		t.Fatal(err)
	}
	r.InvalidateGroup("example.com")
	if _, err := r.Resolve("example.com/v1", "Widget"); err != nil {
		t.Fatal(err)
	}
	want := []string{"ConfigMap", "Widget", "Widget", "ConfigMap", "Widget"}
	if diff := cmp.Diff(want, s.asked); diff != "" {
		t.Errorf("questions to the server (-want +got):\n%s", diff)
	}
	if _, err := r.Resolve("a/b/c", "X"); err == nil {
		t.Error("an invalid apiVersion resolved")
	}
}
