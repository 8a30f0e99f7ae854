package standalone

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/pflag"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/quotaplane/quotaplane/config/crd"
	"github.com/quotaplane/quotaplane/internal/clientconfig"
	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/grantpolicy"
	"github.com/quotaplane/quotaplane/internal/requests"
	"github.com/quotaplane/quotaplane/internal/tenancy"
)

// Options of quotaplane controller.
type Options struct {
	Kubeconfig     string
	MetricsAddress string
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{MetricsAddress: "127.0.0.1:8080"}
}

// AddFlags registers the flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of the API server to run against; as kubectl, $KUBECONFIG or ~/.kube/config when not given, and in a pod its service account.")
	fs.StringVar(&o.MetricsAddress, "metrics-bind-address", o.MetricsAddress, "Address serving /metrics and /healthz; empty turns it off.")
}

// Run runs the engine until ctx is done.
func Run(ctx context.Context, o *Options, engineOpts engine.Options) error {
	cfg, err := clientconfig.Load(o.Kubeconfig)
	if err != nil {
		return err
	}
	if err := checkCRDs(ctx, apiextensionsclient.NewForConfigOrDie(cfg)); err != nil {
		return err
	}
	runner, err := engine.New(cfg, engineOpts)
	if err != nil {
		return err
	}
	if err := runner.CheckStore(ctx); err != nil {
		return err
	}
	if o.MetricsAddress != "" {
		l, err := net.Listen("tcp", o.MetricsAddress)
		if err != nil {
			return fmt.Errorf("serving metrics on %s: %w (pass --metrics-bind-address='' to turn it off)", o.MetricsAddress, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", engineOpts.Exporter.Handler(legacyregistry.Handler()))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = hs.Serve(l) }()
		defer hs.Close()
	}
	// The grant engine campaigns on its own Lease, as this process.
	grants := grantpolicy.DefaultOptions()
	if engineOpts.SystemNamespace != "" {
		grants.SystemNamespace = engineOpts.SystemNamespace
	}
	grants.Identity = engineOpts.Identity
	grants.Metrics = engineOpts.Exporter
	if engineOpts.LeaseDuration > 0 {
		grants.LeaseDuration, grants.RenewDeadline, grants.RetryPeriod = engineOpts.LeaseDuration, engineOpts.RenewDeadline, engineOpts.RetryPeriod
	}
	if err := grantpolicy.Start(grants)(ctx, cfg); err != nil {
		return err
	}
	tenancyOpts := tenancy.Options{Namespace: engineOpts.SystemNamespace, Identity: engineOpts.Identity,
		LeaseDuration: engineOpts.LeaseDuration, RenewDeadline: engineOpts.RenewDeadline, RetryPeriod: engineOpts.RetryPeriod}
	if tenancyOpts.Identity == "" {
		host, _ := os.Hostname()
		tenancyOpts.Identity = fmt.Sprintf("%s_%d", host, os.Getpid())
	}
	if err := tenancy.Start(tenancyOpts)(ctx, cfg); err != nil {
		return err
	}
	requestOpts := requests.Options{Namespace: tenancyOpts.Namespace, Identity: tenancyOpts.Identity,
		LeaseDuration: tenancyOpts.LeaseDuration, RenewDeadline: tenancyOpts.RenewDeadline, RetryPeriod: tenancyOpts.RetryPeriod}
	if err := requests.Start(requestOpts)(ctx, cfg); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Running the quota engine and the tenancy controllers", "server", cfg.Host)
	return runner.Run(ctx)
}

// checkCRDs fails with instructions when a quota kind is not served: its
// CRD is missing, and no API server serves it natively (serve does; the
// journal check that follows then refuses it, saying why).
func checkCRDs(ctx context.Context, client apiextensionsclient.Interface) error {
	crds, err := crd.All()
	if err != nil {
		return err
	}
	for _, c := range crds {
		_, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, c.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && servedNatively(client, c) {
			continue
		}
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("CRD %s is not installed on this API server; install the quota CRDs first: quotaplane crds | kubectl apply -f -", c.Name)
		}
		if err != nil {
			return fmt.Errorf("checking CRD %s: %w", c.Name, err)
		}
	}
	return nil
}

// servedNatively tells whether the server serves c's kind without its CRD.
func servedNatively(client apiextensionsclient.Interface, c *apiextensionsv1.CustomResourceDefinition) bool {
	for _, v := range c.Spec.Versions {
		list, err := client.Discovery().ServerResourcesForGroupVersion(c.Spec.Group + "/" + v.Name)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			if r.Name == c.Spec.Names.Plural {
				return true
			}
		}
	}
	return false
}
