package verify

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/quotaplane/quotaplane/internal/clientconfig"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/etcdflags"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/policy/governed"
)

// Options are the settings of quotaplane verify.
type Options struct {
	// Kubeconfig reaches the API server; it defaults to the admin kubeconfig
	// of DataDir.
	Kubeconfig string
	// DataDir is the data directory of a local quotaplane serve: its admin
	// kubeconfig and its etcd (recorded in formats.EtcdFile) are used
	// unless given explicitly.
	DataDir string
	// Etcd reaches the etcd that holds admission's journal and fail-open
	// records: without EtcdServers (or DataDir) those are not checked.
	// EtcdPrefix is the API server's --etcd-prefix.
	etcdflags.Etcd
	// SystemNamespace is the engine's (--system-namespace): its Lease, its
	// ledger, and the buckets of consumers without a namespace.
	SystemNamespace string
	// ExemptNamespaces are serve's --quota-exempt-namespaces: no policy
	// charges objects there (the system namespace always).
	ExemptNamespaces []string
	// RecheckAfter: when the first reading finds discrepancies, the plane is
	// read again after this long and only those found again are reported,
	// so that changes in progress are not reported as damage. 0 reports the
	// first reading.
	RecheckAfter time.Duration
	// PageSize is the limit of each list.
	PageSize int64
	// ControlPlane narrows the objects judged to one control plane
	// ("projects/<name>", "organizations/<name>", or "root"); "" judges the
	// root's and every plane's. The accounts are always checked whole.
	ControlPlane string
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		Etcd:             etcdflags.Defaults(),
		SystemNamespace:  "quotaplane-system",
		ExemptNamespaces: append([]string(nil), governed.DefaultExemptNamespaces...),
		RecheckAfter:     3 * time.Second,
		PageSize:         500,
	}
}

// AddFlags registers the flags of verify.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of the API server to audit. Defaults to <data-dir>/admin.kubeconfig with --data-dir, else $KUBECONFIG, else ~/.kube/config.")
	fs.StringVar(&o.DataDir, "data-dir", o.DataDir, "Data directory of a local quotaplane serve: use its admin kubeconfig and the etcd it recorded in "+formats.EtcdFile+".")
	o.Etcd.AddFlags(fs, "URLs of the etcd that holds admission's in-flight grants and fail-open records. Without it (or --data-dir) they are not checked.")
	fs.StringVar(&o.SystemNamespace, "system-namespace", o.SystemNamespace, "The quota engine's system namespace (its Lease, ledger, and the buckets of consumers without a namespace).")
	fs.StringSliceVar(&o.ExemptNamespaces, governed.FlagName, o.ExemptNamespaces, governed.FlagUsage)
	fs.DurationVar(&o.RecheckAfter, "recheck-after", o.RecheckAfter, "When the first reading finds discrepancies, read again after this long and report only those found again (changes in progress are not damage). 0 reports the first reading.")
	fs.Int64Var(&o.PageSize, "page-size", o.PageSize, "Items per list request.")
	fs.StringVar(&o.ControlPlane, "control-plane", o.ControlPlane, "Judge the objects of one control plane only: projects/<name>, organizations/<name>, or root. Default: the root and every plane (docs/control-planes.md). The accounts are always checked whole.")
}

// complete fills in what DataDir implies and checks the rest.
func (o Options) complete() (Options, error) {
	if o.ControlPlane != "" && o.ControlPlane != "root" {
		if _, err := planes.Parse(o.ControlPlane); err != nil {
			return o, fmt.Errorf("--control-plane: %w, or root", err)
		}
	}
	if o.DataDir != "" {
		o.Kubeconfig = o.KubeconfigPath()
		if len(o.EtcdServers) == 0 {
			loc, err := formats.ReadEtcdFile(o.DataDir)
			if err != nil {
				return o, err
			}
			o.EtcdServers, o.EtcdPrefix = loc.Servers, loc.Prefix
			o.EtcdCAFile, o.EtcdCertFile, o.EtcdKeyFile = loc.CAFile, loc.CertFile, loc.KeyFile
		}
	}
	o.Etcd.Complete()
	if o.PageSize <= 0 {
		o.PageSize = 500
	}
	var errs []error
	errs = append(errs, o.Etcd.Validate()...)
	if (o.EtcdCertFile == "") != (o.EtcdKeyFile == "") {
		errs = append(errs, errors.New("--etcd-certfile and --etcd-keyfile go together: give both or neither"))
	}
	if o.RecheckAfter < 0 {
		errs = append(errs, fmt.Errorf("--recheck-after %s must not be negative", o.RecheckAfter))
	}
	return o, errors.Join(errs...)
}

// KubeconfigPath is the kubeconfig verify was given: --kubeconfig, else the
// admin kubeconfig of --data-dir; "" means $KUBECONFIG, else ~/.kube/config.
func (o Options) KubeconfigPath() string { return clientconfig.Path(o.Kubeconfig, o.DataDir) }

// RESTConfig reads the kubeconfig verify uses, as kubectl finds one.
func (o Options) RESTConfig() (*rest.Config, error) { return clientconfig.Load(o.KubeconfigPath()) }
