package nativeapi

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// REST is a native kind's storage.
type REST struct {
	*genericregistry.Store
	k *Kind
}

var (
	_ rest.ShortNamesProvider   = &REST{}
	_ rest.CategoriesProvider   = &REST{}
	_ rest.SingularNameProvider = &REST{}
)

func (r *REST) ShortNames() []string { return r.k.ShortNames }
func (r *REST) Categories() []string { return r.k.Categories }

// StatusREST is the /status subresource.
type StatusREST struct {
	store *genericregistry.Store
}

var (
	_ rest.Patcher             = &StatusREST{}
	_ rest.ResetFieldsStrategy = &StatusREST{}
)

func (r *StatusREST) New() runtime.Object { return r.store.New() }
func (r *StatusREST) Destroy()            {}

func (r *StatusREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	return r.store.Get(ctx, name, options)
}

func (r *StatusREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	// Status never creates: the object must exist.
	return r.store.Update(ctx, name, objInfo, createValidation, updateValidation, false, options)
}

func (r *StatusREST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return r.store.GetResetFields()
}

func (r *StatusREST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return r.store.ConvertToTable(ctx, object, tableOptions)
}

// NewREST makes a kind's storage, and its status subresource's when it has
// one, from the API server's REST options (etcd, the watch cache, the
// storage codec).
func NewREST(k *Kind, optsGetter generic.RESTOptionsGetter) (*REST, *StatusREST, error) {
	s := newStrategy(k)
	gr := k.GroupResource()
	store := &genericregistry.Store{
		NewFunc:     k.New,
		NewListFunc: k.NewList,
		PredicateFunc: func(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
			return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: s.GetAttrs}
		},
		DefaultQualifiedResource:  gr,
		SingularQualifiedResource: schema.GroupResource{Group: gr.Group, Resource: k.Singular},
		CreateStrategy:            s,
		UpdateStrategy:            s,
		DeleteStrategy:            s,
		ResetFieldsStrategy:       s,
		TableConvertor:            k.table,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: s.GetAttrs}); err != nil {
		return nil, nil, fmt.Errorf("storage of %s: %w", gr, err)
	}
	main := &REST{Store: store, k: k}
	if !k.HasStatus {
		return main, nil, nil
	}
	st := &statusStrategy{strategy: s}
	statusStore := *store
	statusStore.UpdateStrategy = st
	statusStore.ResetFieldsStrategy = st
	statusStore.CreateStrategy = nil
	statusStore.DeleteStrategy = nil
	return main, &StatusREST{store: &statusStore}, nil
}

// APIGroups builds the API group infos of the native groups, every kind
// stored through optsGetter; the answered resources served by their storage.
func APIGroups(optsGetter generic.RESTOptionsGetter, answered Answered) ([]*genericapiserver.APIGroupInfo, error) {
	ks, err := Kinds()
	if err != nil {
		return nil, err
	}
	byGroup := map[string]*genericapiserver.APIGroupInfo{}
	var out []*genericapiserver.APIGroupInfo
	for _, k := range ks {
		info, ok := byGroup[k.GVK.Group]
		if !ok {
			i := genericapiserver.NewDefaultAPIGroupInfo(k.GVK.Group, Scheme(), legacyscheme.ParameterCodec, legacyscheme.Codecs)
			info = &i
			info.NegotiatedSerializer = schemaErrors{legacyscheme.Codecs}
			byGroup[k.GVK.Group] = info
			out = append(out, info)
		}
		main, status, err := NewREST(k, optsGetter)
		if err != nil {
			return nil, err
		}
		v := info.VersionedResourcesStorageMap[k.GVK.Version]
		if v == nil {
			v = map[string]rest.Storage{}
			info.VersionedResourcesStorageMap[k.GVK.Version] = v
		}
		v[k.Resource] = main
		if status != nil {
			v[k.Resource+"/status"] = status
		}
	}
	if len(answered) > 0 {
		rk, err := reviewKind()
		if err != nil {
			return nil, err
		}
		info := byGroup[rk.GVK.Group]
		for resource, st := range answered {
			info.VersionedResourcesStorageMap[rk.GVK.Version][resource] = st
		}
	}
	return out, nil
}
