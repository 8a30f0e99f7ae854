package settle

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/planes"
)

// TestPlaneWatchFailureChecksItsClaims: when the watch of a plane's objects
// fails, the claims of that plane's objects, and only those, are looked at
// again with live reads; a forgotten claim is not.
func TestPlaneWatchFailureChecksItsClaims(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := NewObjectWatch(nil, nil, nil, nil)
	w.crdWatch = true // no server to watch CRDs on
	claim := func(name, uid, plane string) *quotav1alpha1.ResourceClaim {
		c := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "q", Name: name, Annotations: map[string]string{
			quotav1alpha1.AnnotationResourceUID: uid, quotav1alpha1.AnnotationResource: "secrets.v1"}}}
		if plane != "" {
			c.Annotations[planes.Annotation] = plane
		}
		c.Spec.ResourceRef = &quotav1alpha1.ResourceRef{Kind: "Secret", Namespace: "default", Name: name}
		return c
	}
	gone := claim("a-gone", "u0", "projects/a")
	for _, c := range []*quotav1alpha1.ResourceClaim{claim("a1", "u1", "projects/a"), claim("a2", "u2", "projects/a"),
		claim("b1", "u3", "projects/b"), claim("root", "u4", ""), gone} {
		w.Observe(ctx, c)
	}
	w.Forget(gone)
	drain := func() []string {
		var keys []string
		for w.Queue.Len() > 0 {
			k, _ := w.Queue.Get()
			w.Queue.Done(k)
			keys = append(keys, k)
		}
		return keys
	}
	drain()
	w.checkPlane("projects/a")
	got := drain()
	if len(got) == 2 && got[0] > got[1] {
		got[0], got[1] = got[1], got[0]
	}
	if diff := cmp.Diff([]string{"q/a1", "q/a2"}, got); diff != "" {
		t.Errorf("claims checked when plane a's watch failed (-want +got):\n%s", diff)
	}
}

// TestAPlanesWatchesStopWithItsLastClaim: the watches of a plane's objects
// stop when the last claim tracked in that plane is forgotten (a removed
// plane's watches would otherwise relist against a 404 for ever), and only
// then; another plane's and the root's go on.
func TestAPlanesWatchesStopWithItsLastClaim(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := NewObjectWatch(nil, nil, nil, nil)
	w.crdWatch = true
	claim := func(name, plane string) *quotav1alpha1.ResourceClaim {
		c := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "q", Name: name, Annotations: map[string]string{
			quotav1alpha1.AnnotationResourceUID: "uid-" + name, quotav1alpha1.AnnotationResource: "secrets.v1"}}}
		if plane != "" {
			c.Annotations[planes.Annotation] = plane
		}
		c.Spec.ResourceRef = &quotav1alpha1.ResourceRef{Kind: "Secret", Namespace: "default", Name: name}
		return c
	}
	a1, a2, b1, root := claim("a1", "projects/a"), claim("a2", "projects/a"), claim("b1", "projects/b"), claim("root", "")
	for _, c := range []*quotav1alpha1.ResourceClaim{a1, a2, a1, b1, root} { // a1 twice: observed again on an update
		w.Observe(ctx, c)
	}
	stopped := map[string]bool{}
	for _, k := range []watchKey{{plane: "projects/a"}, {plane: "projects/b"}, {plane: ""}} {
		k.gr.Resource = "secrets"
		w.informers[k] = watched{stop: func() { stopped[k.plane] = true }}
	}
	watching := func() []string {
		var out []string
		for k := range w.informers {
			out = append(out, k.plane)
		}
		slices.Sort(out)
		return out
	}
	w.Forget(a1)
	if diff := cmp.Diff([]string{"", "projects/a", "projects/b"}, watching()); diff != "" || len(stopped) > 0 {
		t.Fatalf("after the first of plane a's two claims (-want +got):\n%s; stopped %v", diff, stopped)
	}
	w.Forget(a2)
	if diff := cmp.Diff([]string{"", "projects/b"}, watching()); diff != "" || !stopped["projects/a"] || len(stopped) != 1 {
		t.Fatalf("after plane a's last claim (-want +got):\n%s; stopped %v", diff, stopped)
	}
	w.Forget(root)
	if diff := cmp.Diff([]string{"", "projects/b"}, watching()); diff != "" {
		t.Errorf("the root's watch stopped with its last claim (-want +got):\n%s", diff)
	}
}
