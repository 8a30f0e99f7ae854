package engine

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// Scheme holds the quota kinds.
var Scheme = runtime.NewScheme()

func init() {
	if err := quotav1alpha1.AddToScheme(Scheme); err != nil {
		panic(err)
	}
}

var parameterCodec = runtime.NewParameterCodec(Scheme)

func newRESTClient(cfg *rest.Config) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &quotav1alpha1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.NegotiatedSerializer = serializer.NewCodecFactory(Scheme).WithoutConversion()
	c.ContentType, c.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
	return rest.RESTClientFor(c)
}

// quorumInformer is an informer whose initial list is a quorum read
// (resourceVersion ""), never served from a watch cache: started after the
// ledger is stamped, its first view includes every write made before.
func quorumInformer(client *rest.RESTClient, resource string, obj runtime.Object, newList func() runtime.Object) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			if opts.ResourceVersion == "0" {
				opts.ResourceVersion = ""
			}
			list := newList()
			err := client.Get().Resource(resource).VersionedParams(&opts, parameterCodec).Timeout(time.Minute).Do(ctx).Into(list)
			if err != nil {
				return nil, fmt.Errorf("listing %s: %w", resource, err)
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			return client.Get().Resource(resource).VersionedParams(&opts, parameterCodec).Watch(ctx)
		},
	}
	return cache.NewSharedIndexInformer(lw, obj, 0, cache.Indexers{})
}
