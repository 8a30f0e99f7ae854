package settle

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/planes"
)

// TestOwnerOf: a claim is owned by its object only where Kubernetes honours
// the ownerReference (the same namespace, or a cluster-scoped object); any
// other claim is tied to its object by ObjectWatch.
func TestOwnerOf(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "x.io", Version: "v1", Resource: "widgets"}
	cases := map[string]struct {
		claimNS, objectNS string
		cluster           string
		plane             bool
		group             string
		wantOwned         bool
	}{
		"same namespace":       {claimNS: "a", objectNS: "a", wantOwned: true},
		"cluster-scoped":       {claimNS: "a", objectNS: "", wantOwned: true},
		"another namespace":    {claimNS: "org", objectNS: "a", wantOwned: false},
		"cluster-scoped claim": {claimNS: "", objectNS: "a", wantOwned: false},
		// The object is in member cluster east: this server's garbage
		// collector would delete the claim of a live object.
		"member, same namespace": {claimNS: "a", objectNS: "a", cluster: "east", wantOwned: false},
		"member, cluster-scoped": {claimNS: "a", objectNS: "", cluster: "east", wantOwned: false},
		// Created through a control plane: an object the plane stores for
		// itself is not the root's; a Project (the root's) is.
		"a plane's own object":                      {claimNS: "project-web", objectNS: "", plane: true, wantOwned: false},
		"a Project created through its org's plane": {claimNS: "organization-acme", objectNS: "", plane: true, group: "resourcemanager.miloapis.com", wantOwned: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := &formats.PendingClaim{Namespace: tc.claimNS, ObjectUID: "u",
				Spec: quotav1alpha1.ResourceClaimSpec{ResourceRef: &quotav1alpha1.ResourceRef{Kind: "Widget", Name: "w", Namespace: tc.objectNS}}}
			if tc.cluster != "" {
				p.Labels = map[string]string{quotav1alpha1.LabelCluster: tc.cluster}
			}
			if tc.plane {
				p.Extra = map[string]string{planes.Annotation: "organizations/acme"}
			}
			gvr := gvr
			if tc.group != "" {
				gvr.Group = tc.group
			}
			refs := ownerOf(p, gvr)
			if (len(refs) == 1) != tc.wantOwned {
				t.Fatalf("owner references %+v; want owned %t", refs, tc.wantOwned)
			}
			if tc.wantOwned && (refs[0].APIVersion != gvr.GroupVersion().String() || refs[0].UID != "u" || refs[0].Kind != "Widget") {
				t.Errorf("owner reference %+v", refs[0])
			}
		})
	}
}

// TestDerivedName: unique to the object and policy, and a valid name
// however long the rendered one.
func TestDerivedName(t *testing.T) {
	a := derivedName(&formats.PendingClaim{Name: "c", ObjectUID: "u1", Policy: "p"})
	b := derivedName(&formats.PendingClaim{Name: "c", ObjectUID: "u2", Policy: "p"})
	long := derivedName(&formats.PendingClaim{Name: strings.Repeat("x", 300), ObjectUID: "u1", Policy: "p"})
	if diff := cmp.Diff([]any{true, true, 253}, []any{a != b, strings.HasPrefix(a, "c-"), len(long)}); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
