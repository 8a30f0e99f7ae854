package governed

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/planes"
)

// TestExemptNamespaces: the system namespace is always exempt, whatever
// the list says.
func TestExemptNamespaces(t *testing.T) {
	for _, tc := range []struct {
		list []string
		want []string
	}{
		{DefaultExemptNamespaces, []string{"kube-node-lease", "kube-public", "kube-system", "quotaplane-system"}},
		{[]string{"ops", " kube-system", ""}, []string{"kube-system", "ops", "quotaplane-system"}},
		{[]string{}, []string{"quotaplane-system"}},
		{[]string{"quotaplane-system"}, []string{"quotaplane-system"}},
	} {
		if diff := cmp.Diff(tc.want, NewExemptions("quotaplane-system", tc.list).Namespaces()); diff != "" {
			t.Errorf("%v: exempt namespaces (-want +got):\n%s", tc.list, diff)
		}
	}
}

// TestExempt: what no policy charges, and what a policy without a namespace
// selector leaves out (the exempt namespaces).
func TestExempt(t *testing.T) {
	e := NewExemptions("quotaplane-system", DefaultExemptNamespaces)
	configMap := schema.GroupKind{Kind: "ConfigMap"}
	for _, tc := range []struct {
		name    string
		gk      schema.GroupKind
		ns, obj string
		inPlane bool
		want    bool
	}{
		{"the system namespace", configMap, "quotaplane-system", "x", false, true},
		{"kube-system", configMap, "kube-system", "x", false, true},
		{"kube-node-lease's Leases", schema.GroupKind{Group: "coordination.k8s.io", Kind: "Lease"}, "kube-node-lease", "x", false, true},
		{"an ordinary namespace", configMap, "default", "x", false, false},
		{"a cluster-scoped object", schema.GroupKind{Kind: "ClusterRole"}, "", "x", false, false},
		{"the Namespace kube-system", schema.GroupKind{Kind: "Namespace"}, "", "kube-system", false, true},
		{"a Namespace, as admission sees it", schema.GroupKind{Kind: "Namespace"}, "kube-system", "kube-system", false, true},
		{"an ordinary Namespace", schema.GroupKind{Kind: "Namespace"}, "", "team-a", false, false},
		{"a plane's kube-system is its tenants'", configMap, "kube-system", "x", true, false},
		{"a plane's namespace named as the system namespace", configMap, "quotaplane-system", "x", true, false},
		{"core Events", schema.GroupKind{Kind: "Event"}, "default", "x", false, true},
		{"events.k8s.io Events", schema.GroupKind{Group: "events.k8s.io", Kind: "Event"}, "default", "x", true, true},
		{"the quota API", schema.GroupKind{Group: quotav1alpha1.GroupName, Kind: "ResourceClaim"}, "default", "x", false, true},
		{"a custom Event kind", schema.GroupKind{Group: "example.com", Kind: "Event"}, "default", "x", false, false},
	} {
		out, err := e.OutOfScope(nil, tc.gk, tc.ns, tc.obj, tc.inPlane, nil)
		if got := e.Exempt(tc.gk, tc.ns, tc.obj, tc.inPlane) || out; got != tc.want || err != nil {
			t.Errorf("%s: exempt %v (%v), want %v", tc.name, got, err, tc.want)
		}
	}
}

// TestOutOfScope: a policy's namespace selector replaces the default
// exemptions at the root; the system namespace stays out, a plane's
// namespaces stay in, and a namespace is selected by its name label
// whatever its labels say.
func TestOutOfScope(t *testing.T) {
	e := NewExemptions("quotaplane-system", DefaultExemptNamespaces)
	configMap := schema.GroupKind{Kind: "ConfigMap"}
	nsLabels := map[string]map[string]string{"dev": {"team": "a"}, "prod": {"team": "b"}, "kube-system": {}, "liar": {NameLabel: "dev"}}
	read := func(ns string) (labels.Set, error) { return NamespaceLabels(ns, nsLabels[ns]), nil }
	team := labels.SelectorFromSet(labels.Set{"team": "a"})
	named, _ := labels.Parse(NameLabel + " in (dev, kube-system)")
	for _, tc := range []struct {
		name    string
		sel     labels.Selector
		ns      string
		inPlane bool
		want    bool
	}{
		{"selected", team, "dev", false, false},
		{"not selected", team, "prod", false, true},
		{"kube-system when a selector names it", named, "kube-system", false, false},
		{"the system namespace, whatever the selector", labels.Everything(), "quotaplane-system", false, true},
		{"a name label that lies", named, "liar", false, true},
		{"a plane's namespace, whatever its labels", team, "prod", true, false},
	} {
		got, err := e.OutOfScope(tc.sel, configMap, tc.ns, "x", tc.inPlane, read)
		if got != tc.want || err != nil {
			t.Errorf("%s: out of scope %v (%v), want %v", tc.name, got, err, tc.want)
		}
	}
}

func TestPlaneConsumer(t *testing.T) {
	web := planes.Plane{Kind: planes.Projects, Name: "web"}
	for _, tc := range []struct {
		consumer quotav1alpha1.ConsumerRef
		refused  bool
	}{
		{quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: "default"}, true},
		{quotav1alpha1.ConsumerRef{APIGroup: "example.com", Kind: "Team", Namespace: "default", Name: "a"}, true},
		{quotav1alpha1.ConsumerRef{APIGroup: planes.Group, Kind: "Project", Name: "web"}, false},
		{quotav1alpha1.ConsumerRef{APIGroup: planes.Group, Kind: "Organization", Name: "acme"}, false},
	} {
		err := PlaneConsumer(web, tc.consumer)
		if (err != nil) != tc.refused {
			t.Errorf("%+v: %v, want refused %v", tc.consumer, err, tc.refused)
			continue
		}
		if err == nil {
			continue
		}
		for _, want := range []string{"control plane of Project web", tc.consumer.Kind + " ", "not the root's"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%+v: %q does not say %q", tc.consumer, err, want)
			}
		}
	}
}
