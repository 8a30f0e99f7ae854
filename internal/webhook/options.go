package webhook

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/quotaplane/quotaplane/internal/clientconfig"
	"github.com/quotaplane/quotaplane/internal/members"
)

// Options configure the webhook.
type Options struct {
	// QuotaKubeconfig reaches the quota plane (quotaplane serve).
	QuotaKubeconfig string
	// Kubeconfig reaches this member cluster; in a pod its service account.
	Kubeconfig string
	// ClusterName is this cluster's name in the quota plane.
	ClusterName string
	// BindAddress and SecurePort are where the webhook serves HTTPS.
	BindAddress string
	SecurePort  int
	// TLSCertFile and TLSKeyFile are the serving certificate; without them
	// a self-signed one is generated in CertDir.
	TLSCertFile, TLSKeyFile string
	CertDir                 string
	// ReconcilePeriod is how often claims and objects are compared.
	ReconcilePeriod time.Duration
	// ReleaseAfter is how long after its claim was written an object that
	// is not in the cluster has its claim released: longer than any create
	// request of the member's API server can take.
	ReleaseAfter time.Duration
	// ChargeAfter is how long an object without a claim is left before the
	// reconcile charges it (its claim may be being written).
	ChargeAfter time.Duration
	// UserPrefix, GroupPrefix and TrustClusterIdentities are what earlier
	// versions mapped this cluster's identities with. They are accepted
	// and ignored (deprecated): the quota plane maps every name of this
	// cluster to "<cluster>:<name>" itself, and trusting a cluster's
	// identities as its own is serve's --trust-member-cluster-identities
	// (docs/clusters.md).
	UserPrefix, GroupPrefix string
	TrustClusterIdentities  bool
	// Timeout bounds one decision by the quota plane.
	Timeout time.Duration
	// QuotaSyncTimeout bounds the start: the quota plane's policies and this
	// cluster's claims must be read within it, or the webhook exits.
	QuotaSyncTimeout time.Duration
	// QuotaKubeconfigSecret is <namespace>/<name> of this cluster's Secret
	// holding QuotaKubeconfig under the key "kubeconfig": each refreshed
	// token is written there, and read from there at start.
	QuotaKubeconfigSecret string
	// QuotaTokenLifetime is what a refreshed token is asked for; a token is
	// refreshed 60% through its lifetime.
	QuotaTokenLifetime time.Duration
	// QuotaTokenRefreshEvery, when positive, refreshes the token at most
	// this long after it was issued. Test builds only
	// (--quota-token-refresh-every, cmd/quotaplane/testhooks.go).
	QuotaTokenRefreshEvery time.Duration
	// ExcludeNamespaces are left alone by the reconcile besides the
	// system's own, as the webhook configuration leaves them alone.
	ExcludeNamespaces []string
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{BindAddress: "0.0.0.0", SecurePort: 9443, CertDir: "quotaplane-webhook-certs", ReconcilePeriod: time.Minute,
		ReleaseAfter: 2 * time.Minute, ChargeAfter: 10 * time.Second, Timeout: 8 * time.Second, QuotaSyncTimeout: 2 * time.Minute,
		QuotaTokenLifetime: 7 * 24 * time.Hour, ExcludeNamespaces: []string{"quotaplane-system"}}
}

// AddFlags adds the webhook's flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.QuotaKubeconfig, "quota-kubeconfig", o.QuotaKubeconfig, "Kubeconfig of the quota plane (quotaplane serve) whose ClaimCreationPolicies this cluster enforces. Required.")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of this member cluster; as kubectl, $KUBECONFIG or ~/.kube/config when not given, and in a pod its service account.")
	fs.StringVar(&o.ClusterName, "cluster-name", o.ClusterName, "This cluster's name in the quota plane: a DNS label, unique among its member clusters. Required.")
	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress, "Address the webhook serves HTTPS on. The default, 0.0.0.0, is every interface of the host (a member cluster's API server must reach it); give 127.0.0.1 to serve only this machine.")
	fs.IntVar(&o.SecurePort, "secure-port", o.SecurePort, "Port the webhook serves HTTPS on: /validate, /healthz, /readyz, /metrics.")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile, "Serving certificate (PEM). Without it a self-signed certificate is generated in --cert-dir.")
	fs.StringVar(&o.TLSKeyFile, "tls-private-key-file", o.TLSKeyFile, "Private key of --tls-cert-file (PEM).")
	fs.StringVar(&o.CertDir, "cert-dir", o.CertDir, "Where a self-signed serving certificate is kept when --tls-cert-file is not given (print-config reads its CA from there).")
	fs.DurationVar(&o.ReconcilePeriod, "reconcile-period", o.ReconcilePeriod, "How often the quota plane's claims for this cluster and the cluster's objects are compared.")
	fs.DurationVar(&o.ReleaseAfter, "release-after", o.ReleaseAfter, "How long a claim may name an object that is not in this cluster before it is released; keep it above the API server's request timeout.")
	fs.DurationVar(&o.ChargeAfter, "charge-after", o.ChargeAfter, "How long an object may exist without a claim before the reconcile charges it.")
	fs.StringVar(&o.UserPrefix, "user-prefix", o.UserPrefix, "Ignored: the quota plane maps this cluster's user names to <cluster>:<name> itself.")
	fs.StringVar(&o.GroupPrefix, "group-prefix", o.GroupPrefix, "Ignored: the quota plane maps this cluster's group names to <cluster>:<name> itself.")
	fs.BoolVar(&o.TrustClusterIdentities, "trust-cluster-identities", o.TrustClusterIdentities, "Ignored: trusting a cluster's identities as the quota plane's own is serve's --trust-member-cluster-identities.")
	for _, f := range []string{"user-prefix", "group-prefix", "trust-cluster-identities"} {
		_ = fs.MarkDeprecated(f, IgnoredIdentityFlags)
	}
	fs.StringSliceVar(&o.ExcludeNamespaces, "exclude-namespaces", o.ExcludeNamespaces, "Namespaces whose objects the reconcile never charges, besides kube-system, kube-public and kube-node-lease: the list given to print-config.")
	fs.DurationVar(&o.Timeout, "decision-timeout", o.Timeout, "How long a create waits for the quota plane before it is refused as unavailable; keep it below the webhook configuration's timeoutSeconds.")
	fs.StringVar(&o.QuotaKubeconfigSecret, "quota-kubeconfig-secret", o.QuotaKubeconfigSecret, "<namespace>/<name> of this cluster's Secret holding --quota-kubeconfig under the key kubeconfig (the file is usually that Secret mounted): each refreshed token is written there, and a restart starts with the token there when it expires later than the file's. The webhook needs get and update on it.")
	fs.DurationVar(&o.QuotaTokenLifetime, "quota-token-lifetime", o.QuotaTokenLifetime, "When --quota-kubeconfig's credential is a service-account token, the webhook asks the quota plane for a successor (create on serviceaccounts/token for its own service account) 60% through the token's lifetime, valid this long (at least 10m; the quota plane may shorten it).")
	fs.DurationVar(&o.QuotaSyncTimeout, "quota-sync-timeout", o.QuotaSyncTimeout, "How long the webhook may take at start to read the quota plane's ClaimCreationPolicies and this cluster's ResourceClaims; past it, it exits with an error saying what to check.")
}

// Validate checks the options, naming the flag at fault.
func (o *Options) Validate() error {
	var errs []error
	if o.QuotaKubeconfig == "" {
		errs = append(errs, errors.New("--quota-kubeconfig is required: the kubeconfig of the quota plane (quotaplane serve) that decides this cluster's quota"))
	}
	if err := members.ValidateName(o.ClusterName); err != nil {
		errs = append(errs, fmt.Errorf("--cluster-name: %w", err))
	}
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-private-key-file go together: give both, or neither to generate a self-signed certificate in --cert-dir"))
	}
	if o.ReconcilePeriod <= 0 || o.ReleaseAfter <= 0 || o.ChargeAfter <= 0 || o.Timeout <= 0 || o.QuotaSyncTimeout <= 0 {
		errs = append(errs, errors.New("--reconcile-period, --release-after, --charge-after, --decision-timeout and --quota-sync-timeout must be positive durations, for example 1m"))
	}
	if o.QuotaTokenLifetime < 10*time.Minute {
		errs = append(errs, fmt.Errorf("--quota-token-lifetime %s: the quota plane issues tokens for 10m at least", o.QuotaTokenLifetime))
	}
	if _, err := o.quotaKubeconfigSecret(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// quotaKubeconfigSecret reads --quota-kubeconfig-secret.
func (o *Options) quotaKubeconfigSecret() (types.NamespacedName, error) {
	if o.QuotaKubeconfigSecret == "" {
		return types.NamespacedName{}, nil
	}
	ns, name, ok := strings.Cut(o.QuotaKubeconfigSecret, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, fmt.Errorf("--quota-kubeconfig-secret %q: give it as <namespace>/<name>, the Secret of this cluster holding --quota-kubeconfig", o.QuotaKubeconfigSecret)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// QuotaConfig is the quota plane's client configuration.
func (o *Options) QuotaConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.QuotaKubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading --quota-kubeconfig %s: %w", o.QuotaKubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	return cfg, nil
}

// memberConfig is this cluster's client configuration.
func (o *Options) memberConfig() (*rest.Config, error) {
	cfg, err := clientconfig.Load(o.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 100, 200
	return cfg, nil
}

// IgnoredIdentityFlags is what the webhook says of --user-prefix,
// --group-prefix and --trust-cluster-identities, still passed by
// deployments of earlier versions: they no longer change anything.
const IgnoredIdentityFlags = "it is ignored: the quota plane maps every user and group name of this cluster to <cluster>:<name> itself, whatever the webhook sends; " +
	"to take this cluster's names as the quota plane's own (one identity provider), a platform administrator starts serve with --trust-member-cluster-identities=<cluster> (docs/clusters.md)"

// identityFlagsPassed says whether any of the ignored identity flags was
// given a value.
func (o *Options) identityFlagsPassed() bool {
	return o.UserPrefix != "" || o.GroupPrefix != "" || o.TrustClusterIdentities
}
