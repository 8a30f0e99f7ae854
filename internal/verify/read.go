package verify

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/kinds"
	"github.com/quotaplane/quotaplane/internal/planes"
)

// verifier holds the clients of one audit. Every one of them only reads.
type verifier struct {
	o        Options
	kube     kubernetes.Interface
	quota    client.Client
	dynamic  dynamic.Interface
	metadata metadata.Interface
	mapper   meta.ResettableRESTMapper
	// served reads CRDs, for kinds discovery does not list yet.
	served *kinds.Resolver
	// etcd is nil when no etcd was given: the journal is not read.
	etcd *clientv3.Client
	// planes reach the objects of control planes.
	planes *planes.Clients
	// nsLabels are the namespaces' labels read for namespace selectors.
	nsLabels map[string]labels.Set
}

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := quotav1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

func connect(ctx context.Context, o Options) (*verifier, error) {
	cfg, err := o.RESTConfig()
	if err != nil {
		return nil, err
	}
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "quotaplane-verify")
	cfg.QPS, cfg.Burst = 50, 100
	v := &verifier{o: o}
	if v.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	// The quota kinds are CRDs: JSON only.
	jsonCfg := rest.CopyConfig(cfg)
	jsonCfg.ContentType, jsonCfg.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
	if v.quota, err = client.New(jsonCfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	if v.dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if v.metadata, err = metadata.NewForConfig(cfg); err != nil {
		return nil, err
	}
	v.planes = planes.NewClients(cfg)
	v.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(v.kube.Discovery()))
	v.served = kinds.New(v.dynamic)
	if _, err := v.kube.Discovery().ServerVersion(); err != nil {
		return nil, fmt.Errorf("the API server %s is not reachable: %w", cfg.Host, err)
	}
	if len(o.EtcdServers) == 0 {
		return v, nil
	}
	var tlsConfig *tls.Config
	if o.EtcdCAFile != "" || o.EtcdCertFile != "" {
		info := transport.TLSInfo{TrustedCAFile: o.EtcdCAFile, CertFile: o.EtcdCertFile, KeyFile: o.EtcdKeyFile}
		if tlsConfig, err = info.ClientConfig(); err != nil {
			return nil, fmt.Errorf("reading the etcd TLS files: %w", err)
		}
	}
	v.etcd, err = clientv3.New(clientv3.Config{Endpoints: o.EtcdServers, TLS: tlsConfig, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("connecting to etcd %v: %w", o.EtcdServers, err)
	}
	probe, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := v.etcd.Get(probe, o.EtcdPrefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
		v.close()
		return nil, fmt.Errorf("etcd %v is not reachable: %w; check --etcd-servers (a local serve records its own in <data-dir>/etcd.json)", o.EtcdServers, err)
	}
	return v, nil
}

func (v *verifier) close() {
	if v.etcd != nil {
		_ = v.etcd.Close()
	}
}

// listQuota lists one quota kind page by page, handing each page to each;
// a page is dropped before the next is read.
func listQuota[L client.ObjectList](ctx context.Context, v *verifier, newList func() L, each func(L) error) error {
	cont := ""
	for {
		list := newList()
		if err := v.quota.List(ctx, list, client.Limit(v.o.PageSize), client.Continue(cont)); err != nil {
			return fmt.Errorf("listing %T: %w", list, err)
		}
		if err := each(list); err != nil {
			return err
		}
		if cont = list.GetContinue(); cont == "" {
			return nil
		}
	}
}

// listObjects lists every object of a resource, in all namespaces, page by
// page. With full unset, only metadata is read.
func (v *verifier) listObjects(ctx context.Context, gvr schema.GroupVersionResource, full bool, each func(obj map[string]any, m metav1.Object)) error {
	return v.listObjectsWith(ctx, v.dynamic, gvr, full, each)
}

// listObjectsWith is listObjects through dyn (a control plane's client);
// metadata-only lists go to the root.
func (v *verifier) listObjectsWith(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, full bool, each func(obj map[string]any, m metav1.Object)) error {
	opts := metav1.ListOptions{Limit: v.o.PageSize}
	for {
		var cont string
		if full {
			list, err := dyn.Resource(gvr).List(ctx, opts)
			if err != nil {
				return fmt.Errorf("listing %s: %w", gvr, err)
			}
			for i := range list.Items {
				each(list.Items[i].Object, &list.Items[i])
			}
			cont = list.GetContinue()
		} else {
			list, err := v.metadata.Resource(gvr).List(ctx, opts)
			if err != nil {
				return fmt.Errorf("listing %s: %w", gvr, err)
			}
			for i := range list.Items {
				each(nil, &list.Items[i])
			}
			cont = list.GetContinue()
		}
		if cont == "" {
			return nil
		}
		opts.Continue = cont
	}
}

// servedVersion finds a served version of a group and resource; false when
// the API server does not serve it.
func (v *verifier) servedVersion(ctx context.Context, gr schema.GroupResource) (schema.GroupVersionResource, bool) {
	gvrs, err := v.mapper.ResourcesFor(gr.WithVersion(""))
	if err == nil && len(gvrs) > 0 {
		return gvrs[0], true
	}
	// Discovery lags a new CRD by seconds: ask the CRD itself.
	if version, ok, err := v.served.CRDVersion(ctx, gr); err == nil && ok {
		return gr.WithVersion(version), true
	}
	return schema.GroupVersionResource{}, false
}

// rangePrefix reads every key under prefix, page by page, at one revision.
func (v *verifier) rangePrefix(ctx context.Context, prefix string, each func(key string, value []byte)) error {
	end := clientv3.GetPrefixRangeEnd(prefix)
	from := prefix
	var rev int64
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(v.o.PageSize)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := v.etcd.Get(ctx, from, opts...)
		if err != nil {
			return fmt.Errorf("reading etcd keys under %s: %w", prefix, err)
		}
		rev = resp.Header.Revision
		for _, kv := range resp.Kvs {
			each(string(kv.Key), kv.Value)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// leader describes who holds the engine's Lease.
func (v *verifier) leader(ctx context.Context) (string, bool, error) {
	lease, err := v.kube.CoordinationV1().Leases(v.o.SystemNamespace).Get(ctx, formats.LeaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "none (no Lease " + v.o.SystemNamespace + "/" + formats.LeaseName + ")", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("reading the engine's Lease: %w", err)
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	if holder == "" || lease.Spec.RenewTime == nil || lease.Spec.LeaseDurationSeconds == nil {
		return "none (the Lease is released)", false, nil
	}
	age := time.Since(lease.Spec.RenewTime.Time).Round(time.Second)
	if age > time.Duration(*lease.Spec.LeaseDurationSeconds)*time.Second {
		return fmt.Sprintf("none (%s's Lease expired; last renewed %s ago)", holder, age), false, nil
	}
	return fmt.Sprintf("%s (Lease renewed %s ago)", holder, age), true, nil
}
