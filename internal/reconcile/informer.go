package reconcile

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NewInformer lists and watches one kind through a controller-runtime client
// (for CRDs, which the typed clientset does not know), in namespace ("": all)
// and limited by labelSelector when it is set.
func NewInformer(cl client.WithWatch, obj client.Object, list client.ObjectList, namespace, labelSelector string, resync time.Duration) toolscache.SharedIndexInformer {
	opts := func(o metav1.ListOptions) *client.ListOptions {
		if labelSelector != "" {
			o.LabelSelector = labelSelector
		}
		return &client.ListOptions{Raw: &o, Namespace: namespace}
	}
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l := list.DeepCopyObject().(client.ObjectList)
			return l, cl.List(ctx, l, opts(o))
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cl.Watch(ctx, list.DeepCopyObject().(client.ObjectList), opts(o))
		},
	}
	return LeanInformer(toolscache.NewSharedIndexInformer(lw, obj, resync, toolscache.Indexers{}))
}
