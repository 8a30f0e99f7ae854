package claimguard

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/members"
	"github.com/quotaplane/quotaplane/internal/planes"
)

// TestWhatAnUpdateChanges: the marks (never changed, by anyone) and the
// cuts (refused while the object is live), each update of a claim named.
func TestWhatAnUpdateChanges(t *testing.T) {
	edit := func(f func(*quotav1alpha1.ResourceClaim)) func(*quotav1alpha1.ResourceClaim) { return f }
	cases := map[string]struct {
		old, new           func(*quotav1alpha1.ResourceClaim)
		wantMark, wantCuts string
	}{
		"nothing":                   {},
		"a label of the user's own": {new: edit(func(c *quotav1alpha1.ResourceClaim) { c.Labels = map[string]string{"team": "a"} })},
		"the plane mark added": {new: edit(func(c *quotav1alpha1.ResourceClaim) { c.Annotations[planes.Annotation] = "projects/x" }),
			wantMark: "this update adds the annotation quota.miloapis.com/control-plane=projects/x"},
		"the plane mark changed": {
			old:      edit(func(c *quotav1alpha1.ResourceClaim) { c.Annotations[planes.Annotation] = "projects/x" }),
			new:      edit(func(c *quotav1alpha1.ResourceClaim) { c.Annotations[planes.Annotation] = "projects/y" }),
			wantMark: "this update changes its annotation quota.miloapis.com/control-plane from projects/x to projects/y"},
		"the plane mark removed": {
			old:      edit(func(c *quotav1alpha1.ResourceClaim) { c.Annotations[planes.Annotation] = "projects/x" }),
			new:      edit(func(c *quotav1alpha1.ResourceClaim) { delete(c.Annotations, planes.Annotation) }),
			wantMark: "this update removes its annotation quota.miloapis.com/control-plane=projects/x"},
		"the plane mark copied to a label": {new: edit(func(c *quotav1alpha1.ResourceClaim) { c.Labels = map[string]string{planes.Annotation: "projects-x"} }),
			wantMark: "this update adds the label quota.miloapis.com/control-plane=projects-x"},
		"the cluster label emptied": {
			old:      edit(func(c *quotav1alpha1.ResourceClaim) { c.Labels = map[string]string{members.Label: "east"} }),
			new:      edit(func(c *quotav1alpha1.ResourceClaim) { c.Labels = map[string]string{members.Label: ""} }),
			wantMark: "this update changes its label quota.miloapis.com/cluster from east to "},
		"the cluster as an annotation": {new: edit(func(c *quotav1alpha1.ResourceClaim) { c.Annotations[members.Label] = "east" }),
			wantMark: "this update adds the annotation quota.miloapis.com/cluster=east"},
		"the object's uid": {new: edit(func(c *quotav1alpha1.ResourceClaim) { c.Annotations[quotav1alpha1.AnnotationResourceUID] = "u2" }),
			wantCuts: "this update changes its annotation quota.miloapis.com/resource-uid"},
		"the resourceRef pointed elsewhere": {new: edit(func(c *quotav1alpha1.ResourceClaim) { c.Spec.ResourceRef.Name = "other" }),
			wantCuts: "this update changes its spec.resourceRef (the object it charges for)"},
		"the resourceRef removed": {new: edit(func(c *quotav1alpha1.ResourceClaim) { c.Spec.ResourceRef = nil }),
			wantCuts: "this update changes its spec.resourceRef (the object it charges for)"},
		"the requests": {new: edit(func(c *quotav1alpha1.ResourceClaim) {
			c.Spec.Requests = []quotav1alpha1.ResourceRequest{{ResourceType: "units", Amount: 0}}
		}), wantCuts: "this update changes its spec.requests"},
		"the consumer": {new: edit(func(c *quotav1alpha1.ResourceClaim) { c.Spec.ConsumerRef.Name = "p2" }),
			wantCuts: "this update changes its spec.consumerRef"},
		"the ownerReference removed": {new: edit(func(c *quotav1alpha1.ResourceClaim) { c.OwnerReferences = nil }),
			wantCuts: "this update removes its ownerReference to that object (as kubectl delete --cascade=orphan would)"},
		"the ownerReference renamed": {new: edit(func(c *quotav1alpha1.ResourceClaim) { c.OwnerReferences[0].Name = "absent" }),
			wantCuts: "this update changes its ownerReference to that object (the garbage collector would take the claim for an orphan)"},
		"another owner added": {new: edit(func(c *quotav1alpha1.ResourceClaim) {
			c.OwnerReferences = append(c.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "u9"})
		}), wantCuts: "this update changes its ownerReferences (the garbage collector would delete the claim with another owner)"},
		"an owner added to a claim without one": {
			old: edit(func(c *quotav1alpha1.ResourceClaim) { c.OwnerReferences = nil }),
			new: edit(func(c *quotav1alpha1.ResourceClaim) {
				c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "u9"}}
			}), wantCuts: "this update changes its ownerReferences (the garbage collector would delete the claim with another owner)"},
		"a finalizer added": {new: edit(func(c *quotav1alpha1.ResourceClaim) { c.Finalizers = []string{"example.com/keep"} })},
		"the last finalizer of a claim being deleted removed": {
			old: edit(func(c *quotav1alpha1.ResourceClaim) {
				now := metav1.Now()
				c.DeletionTimestamp, c.Finalizers = &now, []string{"example.com/keep"}
			}),
			new:      edit(func(c *quotav1alpha1.ResourceClaim) { c.Finalizers = nil }),
			wantCuts: "this update changes the finalizers of a claim being deleted (removing the last one would delete it)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old, c := admitted(), admitted()
			if tc.old != nil {
				tc.old(old)
				tc.old(c)
			}
			if tc.new != nil {
				tc.new(c)
			}
			if diff := cmp.Diff(tc.wantMark, markChange(old, c)); diff != "" {
				t.Errorf("markChange (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCuts, cutFromObject(old, c)); diff != "" {
				t.Errorf("cutFromObject (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWhoReleases: a stored object's claim is released by nobody; a
// member's claim by whoever may release that cluster's.
func TestWhoReleases(t *testing.T) {
	c := admitted()
	cases := map[string]struct {
		h       holder
		release access
		want    bool
	}{
		"root, object live":            {h: holder{live: true}},
		"root, object gone":            {h: holder{}, want: true},
		"plane, object live":           {h: holder{plane: "projects/p1", live: true}},
		"plane, object gone":           {h: holder{plane: "projects/p1"}, want: true},
		"member, release allowed":      {h: holder{cluster: "east"}, release: access{allowed: true}, want: true},
		"member, release not allowed":  {h: holder{cluster: "east"}},
		"member, live does not matter": {h: holder{cluster: "east", live: true}, release: access{allowed: true}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := releaseRefusal("deleting", c, tc.h, tc.release, "alice") == ""; got != tc.want {
				t.Errorf("allowed: %v, want %v", got, tc.want)
			}
		})
	}
}
