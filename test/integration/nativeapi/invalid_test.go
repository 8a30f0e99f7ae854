// Package nativeapi tests serve's native storage of quotaplane's kinds
// against the CRDs it replaced: the same objects refused with the same
// errors, and data a CRD stored read natively after an upgrade.
package nativeapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

func TestMain(m *testing.M) {
	testserver.Quiet()
	m.Run()
}

// invalid are objects each of which breaks one rule of its kind's schema:
// a required field, an enum, a bound, a pattern, a CEL rule, metadata.
var invalid = []struct {
	name, resource, namespace, yaml string
}{
	{"registration without resourceType", "resourceregistrations", "", `
apiVersion: quota.miloapis.com/v1alpha1
kind: ResourceRegistration
metadata: {name: bad-1}
spec: {consumerType: {apiGroup: resourcemanager.miloapis.com, kind: Organization}, type: Entity, baseUnit: projects}`},
	{"registration with an unknown type", "resourceregistrations", "", `
apiVersion: quota.miloapis.com/v1alpha1
kind: ResourceRegistration
metadata: {name: bad-2}
spec: {consumerType: {apiGroup: resourcemanager.miloapis.com, kind: Organization}, type: Sometimes, resourceType: a.example.com/b, baseUnit: b}`},
	{"registration with a bad claiming group", "resourceregistrations", "", `
apiVersion: quota.miloapis.com/v1alpha1
kind: ResourceRegistration
metadata: {name: bad-3}
spec: {consumerType: {apiGroup: resourcemanager.miloapis.com, kind: Organization}, type: Entity, resourceType: a.example.com/b, baseUnit: b,
  claimingResources: [{apiGroup: "Not_A_Group", kind: Project}]}`},
	{"grant with a negative amount", "resourcegrants", "default", `
apiVersion: quota.miloapis.com/v1alpha1
kind: ResourceGrant
metadata: {name: bad-4, namespace: default}
spec: {consumerRef: {apiGroup: resourcemanager.miloapis.com, kind: Organization, name: acme},
  allowances: [{resourceType: a.example.com/b, buckets: [{amount: -1}]}]}`},
	{"grant without allowances", "resourcegrants", "default", `
apiVersion: quota.miloapis.com/v1alpha1
kind: ResourceGrant
metadata: {name: bad-5, namespace: default}
spec: {consumerRef: {apiGroup: resourcemanager.miloapis.com, kind: Organization, name: acme}}`},
	{"claim asking for nothing", "resourceclaims", "default", `
apiVersion: quota.miloapis.com/v1alpha1
kind: ResourceClaim
metadata: {name: bad-6, namespace: default}
spec: {consumerRef: {apiGroup: resourcemanager.miloapis.com, kind: Organization, name: acme}, requests: [{resourceType: a.example.com/b, amount: 0}]}`},
	{"claim with a bad name", "resourceclaims", "default", `
apiVersion: quota.miloapis.com/v1alpha1
kind: ResourceClaim
metadata: {name: Bad_Name, namespace: default}
spec: {consumerRef: {apiGroup: resourcemanager.miloapis.com, kind: Organization, name: acme}, requests: [{resourceType: a.example.com/b, amount: 1}]}`},
	{"claim with the same dimension twice", "resourceclaims", "default", `
apiVersion: quota.miloapis.com/v1alpha1
kind: ResourceClaim
metadata: {name: bad-8, namespace: default}
spec: {consumerRef: {apiGroup: resourcemanager.miloapis.com, kind: Organization, name: acme},
  requests: [{resourceType: a.example.com/b, amount: 1, dimensions: [{key: region, value: a}, {key: region, value: b}]}]}`},
	{"claim policy with an unknown failure policy", "claimcreationpolicies", "", `
apiVersion: quota.miloapis.com/v1alpha1
kind: ClaimCreationPolicy
metadata: {name: bad-9}
spec:
  failurePolicy: Sometimes
  trigger: {resource: {apiVersion: v1, kind: Secret}}
  target: {resourceClaimTemplate: {spec: {consumerRef: {apiGroup: resourcemanager.miloapis.com, kind: Organization, name: acme}, requests: [{resourceType: a.example.com/b, amount: 1}]}}}`},
	{"claim policy without a trigger kind", "claimcreationpolicies", "", `
apiVersion: quota.miloapis.com/v1alpha1
kind: ClaimCreationPolicy
metadata: {name: bad-10}
spec:
  trigger: {resource: {apiVersion: v1}}
  target: {resourceClaimTemplate: {spec: {consumerRef: {apiGroup: resourcemanager.miloapis.com, kind: Organization, name: acme}, requests: [{resourceType: a.example.com/b, amount: 1}]}}}`},
	{"bucket without a resource type", "allowancebuckets", "default", `
apiVersion: quota.miloapis.com/v1alpha1
kind: AllowanceBucket
metadata: {name: bad-11, namespace: default}
spec: {consumerRef: {apiGroup: resourcemanager.miloapis.com, kind: Organization, name: acme}}`},
	{"quota request asking for a negative limit", "quotarequests", "default", `
apiVersion: quota.miloapis.com/v1alpha1
kind: QuotaRequest
metadata: {name: bad-12, namespace: default}
spec: {consumerRef: {apiGroup: resourcemanager.miloapis.com, kind: Organization, name: acme}, resourceType: a.example.com/b, requestedLimit: -5, justification: more}`},
	{"approval rule without an expression", "quotaapprovalrules", "", `
apiVersion: quota.miloapis.com/v1alpha1
kind: QuotaApprovalRule
metadata: {name: bad-13}
spec: {}`},
	{"project without an owner", "projects", "", `
apiVersion: resourcemanager.miloapis.com/v1alpha1
kind: Project
metadata: {name: bad-14}
spec: {}`},
	{"organization of an unknown type", "organizations", "", `
apiVersion: resourcemanager.miloapis.com/v1alpha1
kind: Organization
metadata: {name: bad-15}
spec: {type: Galactic}`},
}

// TestInvalidObjectsRefusedAlike creates every invalid object in a server
// serving the kinds natively and in one serving them as CRDs: both refuse
// each with the same status code, reason, message and causes.
func TestInvalidObjectsRefusedAlike(t *testing.T) {
	crds := start(t, testserver.Options{CRDStorage: true})
	native := start(t, testserver.Options{})
	for _, tc := range invalid {
		t.Run(tc.name, func(t *testing.T) {
			c, n := refusals(t, crds, native, tc.resource, tc.namespace, tc.yaml)
			if c.Code != n.Code || c.Reason != n.Reason || c.Message != n.Message {
				t.Errorf("refused differently:\n  CRD:    %d %s %q\n  native: %d %s %q", c.Code, c.Reason, c.Message, n.Code, n.Reason, n.Message)
			}
			if fmt.Sprint(causes(c)) != fmt.Sprint(causes(n)) {
				t.Errorf("causes differ:\n  CRD:    %v\n  native: %v", causes(c), causes(n))
			}
			if c.Code != 422 {
				t.Errorf("want 422 Invalid, got %d %s: %s", c.Code, c.Reason, c.Message)
			}
		})
	}
	t.Run("field selectors", func(t *testing.T) {
		claims := schema.GroupVersionResource{Group: "quota.miloapis.com", Version: "v1alpha1", Resource: "resourceclaims"}
		list := func(s *testserver.Server, selector string) error {
			d, err := dynamic.NewForConfig(s.Config)
			if err != nil {
				t.Fatal(err)
			}
			_, err = d.Resource(claims).List(context.Background(), metav1.ListOptions{FieldSelector: selector})
			return err
		}
		for _, s := range []*testserver.Server{crds, native} {
			if err := list(s, "spec.consumerRef.name=acme"); err != nil {
				t.Errorf("a selectable field: %v", err)
			}
		}
		var c, n *apierrors.StatusError
		if !errors.As(list(crds, "spec.requests=x"), &c) || !errors.As(list(native, "spec.requests=x"), &n) {
			t.Fatal("a field not selectable: want both to refuse")
		}
		cs, ns := c.ErrStatus, n.ErrStatus
		t.Logf("CRD: %q; native: %q", cs.Message, ns.Message)
		// The native answer begins as the CRD's and goes on to list the
		// fields that can be selected.
		if cs.Code != 400 || ns.Code != cs.Code || ns.Reason != cs.Reason || !strings.HasPrefix(ns.Message, cs.Message) ||
			!strings.Contains(ns.Message, "can be selected by metadata.name, metadata.namespace, spec.consumerRef.kind") {
			t.Errorf("a field not selectable:\n  CRD:    %d %s %q\n  native: %d %s %q", cs.Code, cs.Reason, cs.Message, ns.Code, ns.Reason, ns.Message)
		}
	})
}

// zeros are objects writing a zero where the schema's minimum is 1, in a
// field the Go type leaves out when zero: decoded, it would read as unset.
var zeros = []struct {
	name, resource, namespace, yaml string
}{
	{"registration with a unit conversion factor of zero", "resourceregistrations", "", `
apiVersion: quota.miloapis.com/v1alpha1
kind: ResourceRegistration
metadata: {name: bad-16}
spec: {consumerType: {apiGroup: resourcemanager.miloapis.com, kind: Organization}, type: Allocation, resourceType: a.example.com/b, baseUnit: b,
  unitConversionFactor: 0}`},
	{"registration with a warning threshold of zero", "resourceregistrations", "", `
apiVersion: quota.miloapis.com/v1alpha1
kind: ResourceRegistration
metadata: {name: bad-17}
spec: {consumerType: {apiGroup: resourcemanager.miloapis.com, kind: Organization}, type: Allocation, resourceType: a.example.com/c, baseUnit: c,
  thresholds: {warning: 0, critical: 90}}`},
}

// TestZerosBelowAMinimumAreRefused: both servers refuse a zero the schema
// forbids, naming the field and its minimum. The CRD server answers 422
// from its schema; serve answers 400 from decoding, with the same words
// (docs/native-storage.md): the zero is judged before it reads as unset.
func TestZerosBelowAMinimumAreRefused(t *testing.T) {
	crds := start(t, testserver.Options{CRDStorage: true})
	native := start(t, testserver.Options{})
	for _, tc := range zeros {
		t.Run(tc.name, func(t *testing.T) {
			c, n := refusals(t, crds, native, tc.resource, tc.namespace, tc.yaml)
			// The CRD's words: "spec.x: Invalid value: 0: spec.x in body
			// should be greater than or equal to 1".
			_, detail, _ := strings.Cut(c.Message, " is invalid: ")
			if c.Code != 422 || detail == "" || n.Code != 400 || !strings.Contains(n.Message, detail) {
				t.Errorf("refused differently:\n  CRD:    %d %s %q\n  native: %d %s %q", c.Code, c.Reason, c.Message, n.Code, n.Reason, n.Message)
			}
		})
	}
}

// refusals creates the object of doc in both servers and returns how each
// refused it; both must.
func refusals(t *testing.T, crds, native *testserver.Server, resource, ns, doc string) (byCRD, natively metav1.Status) {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	c := create(t, crds, resource, ns, u)
	n := create(t, native, resource, ns, u)
	if c == nil || n == nil {
		t.Fatalf("want both to refuse: CRD %v, native %v", c, n)
	}
	return c.ErrStatus, n.ErrStatus
}

func causes(s metav1.Status) []metav1.StatusCause {
	if s.Details == nil {
		return nil
	}
	return s.Details.Causes
}

func start(t *testing.T, o testserver.Options) *testserver.Server {
	t.Helper()
	eo := quotatest.FastEngineOptions()
	o.Engine = &eo
	s, err := testserver.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// create creates obj and returns the refusal, nil when it was created.
func create(t *testing.T, s *testserver.Server, resource, ns string, obj *unstructured.Unstructured) *apierrors.StatusError {
	t.Helper()
	d, err := dynamic.NewForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	gv := schema.FromAPIVersionAndKind(obj.GetAPIVersion(), obj.GetKind()).GroupVersion()
	var ri dynamic.ResourceInterface = d.Resource(gv.WithResource(resource))
	if ns != "" {
		ri = d.Resource(gv.WithResource(resource)).Namespace(ns)
	}
	_, err = ri.Create(context.Background(), obj.DeepCopy(), metav1.CreateOptions{})
	if err == nil {
		return nil
	}
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("%s: %v", resource, err)
	}
	return se
}
