package collect

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

var (
	configMaps = resource{gvr: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, namespaced: true}
	now        = metav1.NewTime(time.Unix(1_800_000_000, 0))
)

func obj(ns, name string, opts ...func(*metav1.ObjectMeta)) object {
	m := metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)}
	for _, o := range opts {
		o(&m)
	}
	return object{res: configMaps, meta: m}
}

func deleting(finalizers ...string) func(*metav1.ObjectMeta) {
	return func(m *metav1.ObjectMeta) { m.DeletionTimestamp, m.Finalizers = &now, finalizers }
}

func ownedBy(owner string, block bool) func(*metav1.ObjectMeta) {
	return func(m *metav1.ObjectMeta) {
		m.OwnerReferences = append(m.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: owner, UID: types.UID(m.Namespace + "/" + owner), BlockOwnerDeletion: ptr.To(block)})
	}
}

func namespace(name string, terminating bool) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("ns-" + name)}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}}}
	if terminating {
		ns.DeletionTimestamp = &now
	}
	return ns
}

// said is a step as the test writes it: kind, object (or namespace) and
// what goes with it.
type said struct {
	kind   stepKind
	target string
	extra  string
}

func summary(steps []step) []said {
	var out []said
	for _, s := range steps {
		x := said{kind: s.kind}
		switch {
		case s.obj != nil:
			x.target = s.obj.meta.Namespace + "/" + s.obj.meta.Name
		case s.ns != nil:
			x.target = s.ns.Name
		}
		switch s.kind {
		case deleteObject:
			x.extra = string(s.propagation)
		case dropFinalizer:
			x.extra = s.finalizer
		case dropOwners, checkOwners:
			for _, o := range s.owners {
				x.extra += o.Name
			}
		}
		out = append(out, x)
	}
	return out
}

func TestPlan(t *testing.T) {
	bg, fg := string(metav1.DeletePropagationBackground), string(metav1.DeletePropagationForeground)
	for _, tc := range []struct {
		name  string
		s     snapshot
		want  []said
		again bool
	}{{
		name: "nothing to do: owners present, namespaces live",
		s: snapshot{objects: []object{obj("a", "owner"), obj("a", "dep", ownedBy("owner", false))},
			namespaces: map[string]*corev1.Namespace{"a": namespace("a", false)}},
	}, {
		name:  "the contents of a namespace that is gone",
		s:     snapshot{objects: []object{obj("gone", "x"), obj("gone", "y", deleting("example.com/hold"))}, namespaces: map[string]*corev1.Namespace{}},
		want:  []said{{deleteObject, "gone/x", bg}},
		again: true,
	}, {
		name: "a terminating namespace waits for its contents, an empty one is finalized",
		s: snapshot{objects: []object{obj("t", "x")},
			namespaces: map[string]*corev1.Namespace{"t": namespace("t", true), "empty": namespace("empty", true), "live": namespace("live", false)}},
		want:  []said{{deleteObject, "t/x", bg}, {finalizeNamespace, "empty", ""}},
		again: true,
	}, {
		name: "foreground: blocking dependents deleted in the foreground and waited for, others in the background",
		s: snapshot{objects: []object{obj("a", "owner", deleting(metav1.FinalizerDeleteDependents)),
			obj("a", "blocking", ownedBy("owner", true)), obj("a", "other", ownedBy("owner", false))},
			namespaces: map[string]*corev1.Namespace{"a": namespace("a", false)}},
		want:  []said{{deleteObject, "a/blocking", fg}, {deleteObject, "a/other", bg}},
		again: true,
	}, {
		name: "foreground: no blocking dependent left, the owner goes",
		s: snapshot{objects: []object{obj("a", "owner", deleting(metav1.FinalizerDeleteDependents, "example.com/other")),
			obj("a", "other", ownedBy("owner", false), deleting("example.com/hold"))},
			namespaces: map[string]*corev1.Namespace{"a": namespace("a", false)}},
		want:  []said{{dropFinalizer, "a/owner", metav1.FinalizerDeleteDependents}},
		again: true,
	}, {
		name: "orphan: the owner removed from its dependents first, then let go",
		s: snapshot{objects: []object{obj("a", "owner", deleting(metav1.FinalizerOrphanDependents)), obj("a", "dep", ownedBy("owner", true))},
			namespaces: map[string]*corev1.Namespace{"a": namespace("a", false)}},
		want:  []said{{dropOwners, "a/dep", "owner"}},
		again: true,
	}, {
		name: "orphan: no dependent names it",
		s: snapshot{objects: []object{obj("a", "owner", deleting(metav1.FinalizerOrphanDependents))},
			namespaces: map[string]*corev1.Namespace{"a": namespace("a", false)}},
		want: []said{{dropFinalizer, "a/owner", metav1.FinalizerOrphanDependents}},
	}, {
		name: "owners not stored here are read before anything is deleted",
		s: snapshot{objects: []object{obj("a", "dep", ownedBy("elsewhere", false), ownedBy("owner", false)), obj("a", "owner")},
			namespaces: map[string]*corev1.Namespace{"a": namespace("a", false)}},
		want: []said{{checkOwners, "a/dep", "elsewhere"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			steps, again := plan(tc.s)
			got := summary(steps)
			if len(got) != len(tc.want) {
				t.Fatalf("steps %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("step %d: %+v, want %+v (all: %+v)", i, got[i], tc.want[i], got)
				}
			}
			if again != tc.again {
				t.Fatalf("again %v, want %v", again, tc.again)
			}
		})
	}
}
