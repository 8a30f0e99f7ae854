package applier

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/quotaplane/quotaplane/test/quotatest"
)

// Applier applies objects as a GitOps tool does: one server-side apply
// each (create or update), sent once — no client-side retry — so that the
// caller sees every answer, its status code and Retry-After, and decides
// what to re-apply.
type Applier struct {
	t      testing.TB
	cfg    *rest.Config
	http   *http.Client
	mapper meta.ResettableRESTMapper
}

// Answer is the server's answer to one apply.
type Answer struct {
	Code int
	// RetryAfter is the Retry-After header ("" when absent).
	RetryAfter string
	// Err is the answer as a client-go error (nil for 2xx).
	Err error
}

// New applies through cfg.
func New(t testing.TB, cfg *rest.Config) *Applier {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &Applier{t: t, cfg: cfg, http: hc, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

// Apply server-side applies obj once, as field manager "gitops", forcing
// conflicts.
func (a *Applier) Apply(ctx context.Context, obj *unstructured.Unstructured) Answer {
	a.t.Helper()
	return a.apply(ctx, obj, false)
}

// DryRun is Apply as a server-side dry run: admission answers, nothing is
// stored or taken.
func (a *Applier) DryRun(ctx context.Context, obj *unstructured.Unstructured) Answer {
	a.t.Helper()
	return a.apply(ctx, obj, true)
}

func (a *Applier) apply(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) Answer {
	a.t.Helper()
	gvk := obj.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		a.mapper.Reset()
		m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		a.t.Fatalf("mapping %s: %v", gvk, err)
	}
	p := "/api/" + gvk.Version
	if gvk.Group != "" {
		p = "/apis/" + gvk.Group + "/" + gvk.Version
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		p = path.Join(p, "namespaces", obj.GetNamespace())
	}
	p = path.Join(p, m.Resource.Resource, obj.GetName())
	body, err := json.Marshal(obj.Object)
	if err != nil {
		a.t.Fatal(err)
	}
	u, err := url.Parse(a.cfg.Host)
	if err != nil {
		a.t.Fatal(err)
	}
	u.Path = path.Join(u.Path, p)
	q := url.Values{"fieldManager": {"gitops"}, "force": {"true"}}
	if dryRun {
		q.Set("dryRun", "All")
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, u.String(), bytes.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/apply-patch+yaml")
	req.Header.Set("Accept", "application/json")
	resp, err := a.http.Do(req)
	if err != nil {
		return Answer{Err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(resp.Body)
	out := Answer{Code: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After")}
	if resp.StatusCode >= 300 {
		st := &metav1.Status{}
		if json.Unmarshal(data, st) == nil && st.Kind == "Status" {
			out.Err = &apierrors.StatusError{ErrStatus: *st}
		} else {
			out.Err = fmt.Errorf("%s: %s", resp.Status, data)
		}
	}
	return out
}

// Unstructured is a typed object of Scheme as an apply sends it: with its
// apiVersion and kind.
func Unstructured(t testing.TB, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	gvks, _, err := quotatest.Scheme.ObjectKinds(obj)
	if err != nil {
		t.Fatal(err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvks[0])
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	return u
}
