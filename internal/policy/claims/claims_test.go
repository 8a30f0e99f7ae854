package claims

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/policy"
)

func testClaim() *quotav1alpha1.ResourceClaim {
	return &quotav1alpha1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "secret-s-0123456789", Labels: map[string]string{"a": "b"},
			Annotations: map[string]string{"quota.miloapis.com/policy": "p", "quota.miloapis.com/resource-uid": "u"}},
		Spec: quotav1alpha1.ResourceClaimSpec{
			ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"},
			Requests:    []quotav1alpha1.ResourceRequest{{ResourceType: "example.com/secrets", Amount: 1}},
			ResourceRef: &quotav1alpha1.ResourceRef{Kind: "Secret", Name: "s", Namespace: "ns"},
		},
	}
}

// TestClaimValidator: what the API server refuses in a ResourceClaim create
// — its metadata and its CRD schema — the validator refuses, naming the field.
func TestClaimValidator(t *testing.T) {
	v, err := NewClaimValidator()
	if err != nil {
		t.Fatal(err)
	}
	if errs := v.Validate(testClaim()); len(errs) != 0 {
		t.Fatalf("a valid claim: %v", errs)
	}
	for _, tc := range []struct {
		name  string
		edit  func(*quotav1alpha1.ResourceClaim)
		field string
	}{
		{"name", func(c *quotav1alpha1.ResourceClaim) { c.Name = "Not_Valid" }, "metadata.name"},
		{"label", func(c *quotav1alpha1.ResourceClaim) { c.Labels["bad key!"] = "x" }, "metadata.labels"},
		{"amount", func(c *quotav1alpha1.ResourceClaim) { c.Spec.Requests[0].Amount = 0 }, "spec.requests[0].amount"},
		{"no requests", func(c *quotav1alpha1.ResourceClaim) { c.Spec.Requests = nil }, "spec.requests"},
	} {
		c := testClaim()
		tc.edit(c)
		errs := v.Validate(c)
		if len(errs) == 0 {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		if got := errs.ToAggregate().Error(); !strings.Contains(got, tc.field) {
			t.Errorf("%s: %q does not name %s", tc.name, got, tc.field)
		}
	}
}

// TestClaimValidatorRemembersOnlyTheTemplatesPart: a spec the schema passed
// once is not checked by the schema again, but the object's reference is
// checked for every claim, and every claim the validator passes the full
// schema passes too (and the other way round), whatever the reference.
func TestClaimValidatorRemembersOnlyTheTemplatesPart(t *testing.T) {
	v, err := NewClaimValidator()
	if err != nil {
		t.Fatal(err)
	}
	full, err := NewClaimValidator()
	if err != nil {
		t.Fatal(err)
	}
	if errs := v.Validate(testClaim()); len(errs) != 0 {
		t.Fatalf("a valid claim: %v", errs)
	}
	if _, known := v.passed[mustKey(t, testClaim())]; !known {
		t.Fatal("a spec the schema passed is not remembered")
	}
	long := strings.Repeat("n", 254)
	refs := []*quotav1alpha1.ResourceRef{nil,
		{Kind: "Secret", Name: "s"}, {Kind: "", Name: "s"}, {Kind: "Secret", Name: ""},
		{Kind: "Secret", Name: long}, {Kind: "Secret", Name: long[:253]}, {Kind: strings.Repeat("K", 64), Name: "s"},
		{Kind: "Secret", Name: "s", Namespace: strings.Repeat("n", 64)}, {Kind: "Secret", Name: "s", APIGroup: long},
		{Kind: "Secret", Name: strings.Repeat("é", 200)}, {Kind: "Secret", Name: strings.Repeat("é", 253)}}
	for i, ref := range refs {
		c := testClaim()
		c.Spec.ResourceRef = ref
		got := v.Validate(c)
		want := full.validateSchema(c)
		if (len(got) == 0) != (len(want) == 0) {
			t.Errorf("reference %d (%+v): remembered spec says %v, the schema %v", i, ref, got, want)
		}
		if len(want) > 0 && got.ToAggregate().Error() != want.ToAggregate().Error() {
			t.Errorf("reference %d: %q, the schema says %q", i, got.ToAggregate(), want.ToAggregate())
		}
	}
	// Everything the key leaves out is judged by something else: a new
	// field of these types must be added to specKey (or shown to be so).
	for _, tc := range []struct {
		typ    any
		fields int
	}{
		{quotav1alpha1.ResourceClaimSpec{}, 3}, {quotav1alpha1.ConsumerRef{}, 4}, {quotav1alpha1.ResourceRequest{}, 4},
		{quotav1alpha1.Dimension{}, 2}, {quotav1alpha1.ResourceRef{}, 4},
	} {
		if n := reflect.TypeOf(tc.typ).NumField(); n != tc.fields {
			t.Errorf("%T has %d fields, specKey and resourceRefWithinSchema know %d: add the new ones", tc.typ, n, tc.fields)
		}
	}
	// A claim with a status is never taken from memory.
	c := testClaim()
	c.Status.DecisionSeal = strings.Repeat("x", 200)
	if errs := v.Validate(c); len(errs) == 0 {
		t.Error("a status the schema refuses was passed from memory")
	}
}

func mustKey(t *testing.T, c *quotav1alpha1.ResourceClaim) string {
	t.Helper()
	k, ok := specKey(c)
	if !ok {
		t.Fatal("a rendered claim has no key")
	}
	return k
}

// BenchmarkClaimValidator is what checking one rendered claim costs a create.
func BenchmarkClaimValidator(b *testing.B) {
	v, err := NewClaimValidator()
	if err != nil {
		b.Fatal(err)
	}
	c := testClaim()
	b.ReportAllocs()
	for b.Loop() {
		if errs := v.Validate(c); len(errs) != 0 {
			b.Fatal(errs)
		}
	}
}

// TestNewClaim: the claim is placed and named as documented, tied to its
// object and policy by annotations the template cannot replace, and its name
// is the same every time it is rendered for the same object and policy (the
// engine relies on that to find a claim it wrote before a crash).
func TestNewClaim(t *testing.T) {
	obj := &metav1.ObjectMeta{Name: "w1", UID: types.UID("uid-1")}
	src := ClaimSource{Policy: "widgets", Generation: 3, Kind: schema.GroupVersionKind{Group: "adv.example.com", Version: "v1", Kind: "Widget"},
		Resource: schema.GroupVersionResource{Group: "adv.example.com", Version: "v1", Resource: "widgets"}, Namespace: "apps", Object: obj, SystemNamespace: "quotaplane-system"}
	r := &policy.Rendered{Spec: quotav1alpha1.ResourceClaimSpec{Requests: []quotav1alpha1.ResourceRequest{{ResourceType: "example.com/widgets", Amount: 1}}},
		Annotations: map[string]string{quotav1alpha1.AnnotationResourceUID: "forged", "team": "a"}}
	c := NewClaim(src, r)
	if c.Namespace != "apps" || !strings.HasPrefix(c.Name, "widget-w1-") || c.Name != NewClaim(src, r).Name {
		t.Errorf("claim %s/%s: want a stable name widget-w1-<hash> in the object's namespace", c.Namespace, c.Name)
	}
	if c.Annotations[quotav1alpha1.AnnotationResourceUID] != "uid-1" || c.Annotations["team"] != "a" ||
		c.Annotations[quotav1alpha1.AnnotationResource] != "widgets.v1.adv.example.com" || c.Annotations[quotav1alpha1.AnnotationPolicyGeneration] != "3" {
		t.Errorf("annotations %v", c.Annotations)
	}
	if ref := c.Spec.ResourceRef; ref == nil || ref.Kind != "Widget" || ref.Namespace != "apps" || ref.Name != "w1" || ref.APIGroup != "adv.example.com" {
		t.Errorf("resourceRef %+v", c.Spec.ResourceRef)
	}
	other := src
	other.Policy = "gadgets"
	if NewClaim(other, r).Name == c.Name {
		t.Error("two policies render the same claim name for one object")
	}
	src.Namespace = ""
	if c := NewClaim(src, r); c.Namespace != "quotaplane-system" {
		t.Errorf("a cluster-scoped object's claim is in %q, want the system namespace", c.Namespace)
	}
	// A member cluster's claim: in the cluster's namespace, labelled with
	// it; a template cannot label a claim for a cluster (its settling
	// would not look the object up).
	r.Labels = map[string]string{quotav1alpha1.LabelCluster: "forged"}
	if c := NewClaim(src, r); c.Labels[quotav1alpha1.LabelCluster] != "" {
		t.Errorf("a template labelled the claim of a quota plane object for cluster %q", c.Labels[quotav1alpha1.LabelCluster])
	}
	member := src
	member.Namespace, member.Cluster = "apps", "east"
	if c := NewClaim(member, r); c.Namespace != "cluster-east" || c.Labels[quotav1alpha1.LabelCluster] != "east" || c.Spec.ResourceRef.Namespace != "apps" {
		t.Errorf("member claim %s/%s labels %v ref %+v", c.Namespace, c.Name, c.Labels, c.Spec.ResourceRef)
	}
	r.Labels = nil
	r.Namespace, r.Name = "claims", "fixed"
	if c := NewClaim(src, r); c.Namespace != "claims" || c.Name != "fixed" {
		t.Errorf("the template's namespace and name are not used: %s/%s", c.Namespace, c.Name)
	}
	// In a namespace the template names, shared by every member and the
	// quota plane, a member's claim carries the cluster in its name.
	west := member
	west.Cluster = "west"
	e, w := NewClaim(member, r), NewClaim(west, r)
	if e.Namespace != "claims" || e.Name != "east-fixed" || w.Name != "west-fixed" {
		t.Errorf("members' claims of one template name: %s/%s and %s/%s; want claims/east-fixed and claims/west-fixed", e.Namespace, e.Name, w.Namespace, w.Name)
	}
	r.Namespace = ""
	if c := NewClaim(member, r); c.Namespace != "cluster-east" || c.Name != "fixed" {
		t.Errorf("in the cluster's own namespace the template's name is kept: %s/%s", c.Namespace, c.Name)
	}
}

// TestMemberName: <cluster>-<name>, valid and distinct however long.
func TestMemberName(t *testing.T) {
	long := strings.Repeat("a", 250)
	cut, other := memberName("east", long), memberName("east", long+"b")
	if len(cut) != 253 || !strings.HasPrefix(cut, "east-aaa") || cut == other || cut != memberName("east", long) {
		t.Errorf("long names: %q (%d) and %q", cut, len(cut), other)
	}
	if got := memberName("east", strings.Repeat("a.", 130)); strings.Contains(got, ".-") || len(got) > 253 {
		t.Errorf("a cut at a dot: %q", got)
	}
}
