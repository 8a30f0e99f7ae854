package governed

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
		if got := e.Exempt(tc.gk, tc.ns, tc.obj, tc.inPlane); got != tc.want {
			t.Errorf("%s: exempt %v, want %v", tc.name, got, tc.want)
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
