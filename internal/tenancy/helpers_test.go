package tenancy

import (
	"context"
	"reflect"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// cacheOf is a term's stores holding objs, as its informers would.
func cacheOf(objs ...client.Object) *stores {
	idx := func(indexers toolscache.Indexers) toolscache.Indexer {
		return toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, indexers)
	}
	s := &stores{
		organizations: idx(toolscache.Indexers{}), projects: idx(toolscache.Indexers{projectOwnerIndex: projectOwner}),
		namespaces: idx(toolscache.Indexers{}), roleBindings: idx(toolscache.Indexers{}),
		clusterRoles: idx(toolscache.Indexers{}), clusterRoleBindings: idx(toolscache.Indexers{}),
	}
	for _, o := range objs {
		store, _ := s.of(o)
		if err := store.Add(o); err != nil {
			panic(err)
		}
	}
	return s
}

// describe names a write: "create Namespace organization-acme".
func describe(verb string, obj client.Object) string {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		panic(err)
	}
	name := obj.GetName()
	if ns := obj.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return verb + " " + gvk.Kind + " " + name
}

// liveObjects answers the API reads of what the cache does not hold.
type liveObjects []client.Object

func (l liveObjects) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	for _, o := range l {
		if reflect.TypeOf(o) == reflect.TypeOf(obj) && o.GetName() == key.Name && o.GetNamespace() == key.Namespace {
			reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(o.DeepCopyObject()).Elem())
			return nil
		}
	}
	return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
}

// recorder records the writes a reconcile makes, without applying them, and
// fails those named in fail. SubjectAccessReviews are allowed unless denied.
type recorder struct {
	writes []string
	fail   map[string]error
	denied bool
	// status is the last object whose status was written.
	status client.Object
}

func (r *recorder) record(verb string, obj client.Object) error {
	if sar, ok := obj.(*authorizationv1.SubjectAccessReview); ok {
		a := sar.Spec.ResourceAttributes
		r.writes = append(r.writes, "review "+sar.Spec.User+" "+a.Verb+" "+a.Resource)
		sar.Status.Allowed = !r.denied
		return nil
	}
	w := describe(verb, obj)
	r.writes = append(r.writes, w)
	return r.fail[w]
}

func (r *recorder) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	return r.record("create", obj)
}

func (r *recorder) Delete(_ context.Context, obj client.Object, _ ...client.DeleteOption) error {
	return r.record("delete", obj)
}

func (r *recorder) Patch(_ context.Context, obj client.Object, _ client.Patch, _ ...client.PatchOption) error {
	return r.record("patch", obj)
}

func (r *recorder) Status() client.SubResourceWriter { return statusRecorder{r: r} }

type statusRecorder struct {
	client.SubResourceWriter // only Update is used
	r                        *recorder
}

func (s statusRecorder) Update(_ context.Context, obj client.Object, _ ...client.SubResourceUpdateOption) error {
	s.r.status = obj.DeepCopyObject().(client.Object)
	return s.r.record("update status of", obj)
}
