package admissiontest

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Reads is a dynamic client that answers Get and List from Objects, by
// resource, and NotFound for anything else; Err, when set, answers every
// read. Any other call panics.
type Reads struct {
	Objects map[schema.GroupVersionResource][]*unstructured.Unstructured
	Err     error
}

var _ dynamic.Interface = &Reads{}

// Resource implements dynamic.Interface.
func (r *Reads) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return &resource{reads: r, gvr: gvr}
}

type resource struct {
	dynamic.NamespaceableResourceInterface // nil: other calls panic
	reads                                  *Reads
	gvr                                    schema.GroupVersionResource
	namespace                              string
}

func (c *resource) Namespace(ns string) dynamic.ResourceInterface {
	n := *c
	n.namespace = ns
	return &n
}

func (c *resource) Get(_ context.Context, name string, _ metav1.GetOptions, _ ...string) (*unstructured.Unstructured, error) {
	if c.reads.Err != nil {
		return nil, c.reads.Err
	}
	for _, o := range c.reads.Objects[c.gvr] {
		if o.GetName() == name && o.GetNamespace() == c.namespace {
			return o.DeepCopy(), nil
		}
	}
	return nil, apierrors.NewNotFound(c.gvr.GroupResource(), name)
}

func (c *resource) List(_ context.Context, _ metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	if c.reads.Err != nil {
		return nil, c.reads.Err
	}
	list := &unstructured.UnstructuredList{}
	for _, o := range c.reads.Objects[c.gvr] {
		if c.namespace == "" || o.GetNamespace() == c.namespace {
			list.Items = append(list.Items, *o.DeepCopy())
		}
	}
	return list, nil
}
