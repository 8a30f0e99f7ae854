package nativeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/test/tools"
)

// amountFields are the int-or-string fields of quota.miloapis.com/v1alpha1:
// the model, the property path from it ("[]" for a list's items), the
// definition a built-in kind's field of that type refers to, and the
// kubectl explain path and the type it names.
var amountFields = []struct {
	model   string
	path    []string
	refers  string
	explain string
	shows   string
}{
	{"com.miloapis.quota.v1alpha1.ResourceGrant", []string{"spec", "allowances", "[]", "buckets", "[]", "amount"},
		"io.k8s.apimachinery.pkg.util.intstr.IntOrString", "resourcegrants.spec.allowances.buckets.amount", "<IntOrString>"},
	{"com.miloapis.quota.v1alpha1.ResourceClaim", []string{"spec", "requests", "[]", "amount"},
		"io.k8s.apimachinery.pkg.util.intstr.IntOrString", "resourceclaims.spec.requests.amount", "<IntOrString>"},
	{"com.miloapis.quota.v1alpha1.ClaimCreationPolicy", []string{"spec", "target", "resourceClaimTemplate", "spec", "requests", "[]", "amount"},
		"io.k8s.apimachinery.pkg.util.intstr.IntOrString", "claimcreationpolicies.spec.target.resourceClaimTemplate.spec.requests.amount", "<IntOrString>"},
	{"com.miloapis.quota.v1alpha1.GrantCreationPolicy", []string{"spec", "target", "resourceGrantTemplate", "spec", "allowances", "[]", "buckets", "[]", "amount"},
		"io.k8s.apimachinery.pkg.util.intstr.IntOrString", "grantcreationpolicies.spec.target.resourceGrantTemplate.spec.allowances.buckets.amount", "<IntOrString>"},
	{"com.miloapis.quota.v1alpha1.ResourceRegistration", []string{"spec", "baseUnitQuantity"},
		"io.k8s.apimachinery.pkg.api.resource.Quantity", "resourceregistrations.spec.baseUnitQuantity", "<Quantity>"},
}

// TestAmountsArePublishedAsIntOrString reads the OpenAPI v3 document serve
// publishes for quota.miloapis.com/v1alpha1. Natively served, each amount
// refers to the API's IntOrString definition (a quantity to Quantity), as a
// built-in kind's int-or-string field does, so kubectl explain shows
// <IntOrString> rather than <Object>; the definition referred to is in the
// document and is an integer or a string. Served as CRDs, each amount is
// the CRD's int-or-string (x-kubernetes-int-or-string), which a CRD cannot
// name (docs/compatibility.md).
func TestAmountsArePublishedAsIntOrString(t *testing.T) {
	native := startBare(t, testserver.Options{})
	doc := openAPIV3(t, native)
	for _, f := range amountFields {
		s := property(t, doc, f.model, f.path)
		ref := refOf(s)
		if ref != "#/components/schemas/"+f.refers {
			t.Errorf("native %s %s: %v; want a reference to %s", f.model, strings.Join(f.path, "."), s, f.refers)
			continue
		}
		if d, _ := s["description"].(string); d == "" {
			t.Errorf("native %s %s lost its description: %v", f.model, strings.Join(f.path, "."), s)
		}
		def := schemaAt(doc, f.refers)
		if def == nil || !intOrString(def) {
			t.Errorf("the document's %s is %v; want an integer or a string", f.refers, def)
		}
	}

	// Server-side apply merges by these definitions: an amount applied
	// as an integer, then changed, is one field owned by the applier.
	d := dynamic.NewForConfigOrDie(native.Config)
	ccps := d.Resource(quotav1alpha1.SchemeGroupVersion.WithResource("claimcreationpolicies"))
	for _, amount := range []int64{2, 3} {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(fmt.Sprintf(`
apiVersion: quota.miloapis.com/v1alpha1
kind: ClaimCreationPolicy
metadata: {name: applied-amount}
spec:
  trigger: {resource: {apiVersion: v1, kind: ConfigMap}}
  target: {resourceClaimTemplate: {spec: {requests: [{resourceType: a.example.com/b, amount: %d}]}}}`, amount)), &obj.Object); err != nil {
			t.Fatal(err)
		}
		got, err := ccps.Apply(context.Background(), obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "openapi-test"})
		if err != nil {
			t.Fatalf("server-side apply of a policy with amount %d: %v", amount, err)
		}
		reqs, _, _ := unstructured.NestedSlice(got.Object, "spec", "target", "resourceClaimTemplate", "spec", "requests")
		if len(reqs) != 1 || reqs[0].(map[string]any)["amount"] != amount {
			t.Errorf("applied amount %d, read %v", amount, reqs)
		}
	}

	crds := startBare(t, testserver.Options{CRDStorage: true})
	cdoc := openAPIV3(t, crds)
	for _, f := range amountFields {
		if s := property(t, cdoc, f.model, f.path); !intOrString(s) {
			t.Errorf("as a CRD, %s %s: %v; want x-kubernetes-int-or-string", f.model, strings.Join(f.path, "."), s)
		}
	}

	kubectl := tools.Require(t, tools.Kubectl)
	for _, f := range amountFields {
		out, err := exec.Command(kubectl, "--kubeconfig", native.Kubeconfig, "explain", f.explain).CombinedOutput()
		if err != nil {
			t.Errorf("kubectl explain %s: %v\n%s", f.explain, err, out)
			continue
		}
		field := strings.Fields(firstLine(string(out), "FIELD:"))
		if len(field) != 3 || field[2] != f.shows {
			t.Errorf("kubectl explain %s: %q; want the type %s\n%s", f.explain, strings.Join(field, " "), f.shows, out)
		}
	}
}

func startBare(t *testing.T, o testserver.Options) *testserver.Server {
	t.Helper()
	s, err := testserver.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// openAPIV3 is the server's OpenAPI v3 document of quota.miloapis.com/v1alpha1.
func openAPIV3(t *testing.T, s *testserver.Server) map[string]any {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(s.Config)
	// Served as CRDs, the group's document is published a moment after the
	// CRDs are established (the OpenAPI controller's queue): wait for it.
	var raw []byte
	var err error
	deadline := time.Now().Add(30 * time.Second)
	for {
		raw, err = kube.Discovery().RESTClient().Get().AbsPath("/openapi/v3/apis/quota.miloapis.com/v1alpha1").DoRaw(context.Background())
		if err == nil || !apierrors.IsNotFound(err) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("GET /openapi/v3/apis/quota.miloapis.com/v1alpha1: %v", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func schemaAt(doc map[string]any, model string) map[string]any {
	c, _ := doc["components"].(map[string]any)
	schemas, _ := c["schemas"].(map[string]any)
	s, _ := schemas[model].(map[string]any)
	return s
}

// property walks path from model's schema, through references.
func property(t *testing.T, doc map[string]any, model string, path []string) map[string]any {
	t.Helper()
	s := schemaAt(doc, model)
	if s == nil {
		t.Fatalf("no schema %s in the document", model)
	}
	for i, p := range path {
		if ref := refOf(s); ref != "" && i > 0 {
			s = schemaAt(doc, strings.TrimPrefix(ref, "#/components/schemas/"))
		}
		var next map[string]any
		if p == "[]" {
			next, _ = s["items"].(map[string]any)
		} else {
			props, _ := s["properties"].(map[string]any)
			next, _ = props[p].(map[string]any)
		}
		if next == nil {
			t.Fatalf("%s: no %s in %v", model, strings.Join(path[:i+1], "."), s)
		}
		s = next
	}
	return s
}

// refOf is the reference of a schema, directly or as the one member of
// allOf (how OpenAPI v3 documents write a reference with a description).
func refOf(s map[string]any) string {
	if r, ok := s["$ref"].(string); ok {
		return r
	}
	if all, ok := s["allOf"].([]any); ok && len(all) == 1 {
		if m, ok := all[0].(map[string]any); ok {
			r, _ := m["$ref"].(string)
			return r
		}
	}
	return ""
}

// intOrString: the schema admits an integer and a string, as Kubernetes
// writes it: x-kubernetes-int-or-string, or oneOf/anyOf integer and string
// (the IntOrString definition), or Quantity's string and number.
func intOrString(s map[string]any) bool {
	if v, _ := s["x-kubernetes-int-or-string"].(bool); v {
		return true
	}
	for _, key := range []string{"oneOf", "anyOf"} {
		alts, _ := s[key].([]any)
		types := map[string]bool{}
		for _, a := range alts {
			if m, ok := a.(map[string]any); ok {
				typ, _ := m["type"].(string)
				types[typ] = true
			}
		}
		if types["string"] && (types["integer"] || types["number"]) {
			return true
		}
	}
	return false
}

func firstLine(out, prefix string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), prefix) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
