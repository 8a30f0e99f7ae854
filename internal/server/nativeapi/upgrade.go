package nativeapi

import (
	"context"
	"fmt"
	"path"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/server/storage"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
)

// ConfigureStorage stores each native kind under the key its CRD used,
// <prefix>/<group>/<plural>/..., so that objects a CRD stored are read
// natively where they are, and the engine's journal finds its claims.
func ConfigureStorage(f *storage.DefaultStorageFactory) error {
	ks, err := Kinds()
	if err != nil {
		return err
	}
	for _, k := range ks {
		gr := k.GroupResource()
		f.SetResourceEtcdPrefix(gr, gr.Group+"/"+gr.Resource)
		if _, ok := k.New().(interface{ Marshal() ([]byte, error) }); !ok {
			// Without protobuf marshalling, the kind is stored as JSON.
			f.SetSerializer(gr, runtime.ContentTypeJSON, legacyscheme.Codecs)
		}
	}
	return nil
}

// crdKey is where the API server keeps a CustomResourceDefinition.
func crdKey(prefix, name string) string {
	return path.Join("/", prefix, "apiextensions.k8s.io", "customresourcedefinitions", name)
}

// DropObsoleteCRDs removes, before the API server starts, the definitions
// of the kinds a previous version of serve installed as CRDs. Their objects
// are untouched: the native storage reads them at the same keys. Deleting
// such a CRD through the API would delete every object of its kind first
// (its cleanup finalizer), and a CRD left in place would claim the same
// group version as the native API; so this is one of the writes the API
// server does not make (docs/native-storage.md), done while nothing serves.
func DropObsoleteCRDs(ctx context.Context, c *clientv3.Client, prefix string) error {
	names, err := Names()
	if err != nil {
		return err
	}
	for _, n := range names {
		resp, err := c.Delete(ctx, crdKey(prefix, n))
		if err != nil {
			return fmt.Errorf("removing the obsolete CustomResourceDefinition %s: %w", n, err)
		}
		if resp.Deleted > 0 {
			klog.InfoS("Serving natively the kind a CustomResourceDefinition served; its objects are kept", "crd", n)
		}
	}
	return nil
}
