package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/enginemetrics"
	"github.com/quotaplane/quotaplane/internal/engine/fence"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/engine/hierarchy"
	"github.com/quotaplane/quotaplane/internal/engine/observe"
	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/engine/settle"
	"github.com/quotaplane/quotaplane/internal/kinds"
	"github.com/quotaplane/quotaplane/internal/leader"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/policy/governed"
	"github.com/quotaplane/quotaplane/internal/policy/triggerschema"
)

// Options configure the engine.
type Options struct {
	// SystemNamespace holds the leader Lease, the ledger, and the buckets of
	// consumers without a namespace of their own.
	SystemNamespace string
	// ExemptNamespaces are, besides SystemNamespace (always exempt), the
	// namespaces whose objects no ClaimCreationPolicy charges, at admission
	// and when existing objects are charged (internal/policy/governed). Nil:
	// governed.DefaultExemptNamespaces.
	ExemptNamespaces []string
	// Identity names this replica in the Lease; defaults to host_pid_random.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// HoldPeriod is how long after admission a request can still store its
	// object: a grant whose request's end is not known is held that long
	// before the object is looked up a last time. It must exceed the API
	// server's request timeout; serve sets it from its own (60 s + 10 s).
	HoldPeriod time.Duration
	// Workers write claim statuses and buckets in parallel.
	Workers int
	// ExpiryWarning is how long before a grant's spec.expiresAt the grant
	// and its buckets are ExpiringSoon (0: never).
	ExpiryWarning time.Duration
	// PolicyImpactEvery is how often a ClaimCreationPolicy generation in
	// mode Warn or Audit has its status.impact computed again.
	PolicyImpactEvery time.Duration
	// ClockOffset shifts the clock this replica judges grant windows by
	// (a leader whose clock is behind or ahead). Only test harnesses set it:
	// the in-process server's options, or the hidden flag of a binary built
	// with the quotaplane_testhooks tag (cmd/quotaplane/testhooks.go). No
	// flag of the shipped binary sets it: zero in production.
	ClockOffset time.Duration
	// Handle, when set, lets in-process admission use this engine while it
	// leads.
	Handle *route.Handle
	// Exporter, when set, shows the leading term's state on /metrics and
	// records its decision history.
	Exporter *observe.Exporter
	// Parents declare where each consumer kind's parent is found, for
	// registrations with parentConsumerTypes. Nil: hierarchy.DefaultParents.
	Parents []hierarchy.ParentRelation
	// parentFlags are --consumer-parent values, parsed by New.
	parentFlags []string
}

// DefaultOptions are the production defaults.
func DefaultOptions() Options {
	return Options{
		SystemNamespace:   "quotaplane-system",
		ExemptNamespaces:  append([]string(nil), governed.DefaultExemptNamespaces...),
		LeaseDuration:     15 * time.Second,
		RenewDeadline:     10 * time.Second,
		RetryPeriod:       2 * time.Second,
		Workers:           16,
		ExpiryWarning:     72 * time.Hour,
		PolicyImpactEvery: time.Minute,
	}
}

// Runner campaigns for leadership and, while leader, runs the engine.
type Runner struct {
	opts     Options
	kube     kubernetes.Interface
	metadata metadata.Interface
	// dynamic reads whole objects, to check how an update ended.
	dynamic dynamic.Interface
	// planes reach objects stored in control planes.
	planes *planes.Clients
	rest   *rest.RESTClient
	client client.Client
	scheme *runtime.Scheme
	// served finds the version a claim's object is read at now.
	served *kinds.Resolver
	// schemas finds trigger kinds' schemas, to judge policies' CEL cost.
	schemas *triggerschema.Resolver
	// mapper finds the resource of a policy's trigger kind.
	mapper meta.ResettableRESTMapper
	// kinds says whether a registration's consumer kind is served.
	kinds *kinds.KindCache
	// terms counts the terms this process has led.
	terms int
	// events records the engine's Events, made when first needed.
	eventsOnce sync.Once
	events     record.EventRecorder
}

// kindsMaxAge is how stale the engine's view of served kinds may be for a
// kind it found served (a kind not found is always looked for afresh).
const kindsMaxAge = 30 * time.Second

// now is the time grant windows are judged at: this replica's clock.
func (r *Runner) now() time.Time { return time.Now().Add(r.opts.ClockOffset) }

// New creates a runner for the API server reached through cfg.
func New(cfg *rest.Config, opts Options) (*Runner, error) {
	def := DefaultOptions()
	if opts.SystemNamespace == "" {
		opts.SystemNamespace = def.SystemNamespace
	}
	if opts.ExemptNamespaces == nil {
		opts.ExemptNamespaces = def.ExemptNamespaces
	}
	if opts.HoldPeriod == 0 {
		opts.HoldPeriod = settle.DefaultHoldPeriod
	}
	if opts.Handle != nil {
		opts.Handle.SetHoldPeriod(opts.HoldPeriod)
	}
	if opts.LeaseDuration == 0 {
		opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = def.LeaseDuration, def.RenewDeadline, def.RetryPeriod
	}
	if opts.Workers == 0 {
		opts.Workers = def.Workers
	}
	if len(opts.parentFlags) > 0 {
		opts.Parents = nil
		for _, f := range opts.parentFlags {
			rel, err := hierarchy.ParseParentRelation(f)
			if err != nil {
				return nil, err
			}
			opts.Parents = append(opts.Parents, rel)
		}
	}
	if opts.Parents == nil {
		opts.Parents = hierarchy.DefaultParents()
	}
	if opts.Identity == "" {
		host, _ := os.Hostname()
		opts.Identity = fmt.Sprintf("%s_%d_%s", host, os.Getpid(), rand.String(6))
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 1000, 2000
	cfg = rest.AddUserAgent(cfg, "quotaplane-quota-engine")
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	planeClients := planes.NewClients(cfg)
	scheme := runtime.NewScheme()
	if err := quotav1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	rc, err := newRESTClient(cfg, scheme)
	if err != nil {
		return nil, err
	}
	// The quota kinds may be CRDs (another cluster): JSON bodies, protobuf
	// answers where they are served natively.
	jsonCfg := rest.CopyConfig(cfg)
	jsonCfg.ContentType, jsonCfg.AcceptContentTypes = runtime.ContentTypeJSON, readContentTypes
	cl, err := client.New(jsonCfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Runner{opts: opts, kube: kube, metadata: md, dynamic: dyn, planes: planeClients, rest: rc, client: cl, scheme: scheme, served: kinds.New(dyn), kinds: kinds.NewKindCache(kube.Discovery(), kindsMaxAge), schemas: triggerschema.New(kube.Discovery(), 0),
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))}, nil
}

// Start runs the engine in the background until ctx is done. It matches the
// server's Component signature.
func Start(opts Options) func(ctx context.Context, cfg *rest.Config) error {
	return func(ctx context.Context, cfg *rest.Config) error {
		r, err := New(cfg, opts)
		if err != nil {
			return err
		}
		go func() { _ = r.Run(ctx) }()
		return nil
	}
}

// CheckStore refuses, before campaigning, to run an engine without
// admission's journal on a store where quotaplane serve's engine has run
// (fence.ErrJournalInUse): the ledger says so. The same check is made again at
// every stamp, for a serve that appears later.
func (r *Runner) CheckStore(ctx context.Context) error {
	if r.opts.Handle != nil && r.opts.Handle.Storage() != nil {
		return nil
	}
	cm, err := r.kube.CoreV1().ConfigMaps(r.opts.SystemNamespace).Get(ctx, formats.LedgerName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the ledger %s/%s: %w", r.opts.SystemNamespace, formats.LedgerName, err)
	}
	if cm.Data[formats.LedgerJournalKey] == "true" {
		return fence.ErrJournalInUse
	}
	return nil
}

// Run campaigns for leadership until ctx is done (internal/leader). While
// leader it decides; when it loses leadership, or finds the ledger taken
// over, it stops deciding at once and campaigns again. It returns an error
// only when it must not run on this store at all (fence.ErrJournalInUse).
func (r *Runner) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("identity", r.opts.Identity)
	election := leader.Election{Namespace: r.opts.SystemNamespace, Lease: formats.LeaseName, Identity: r.opts.Identity,
		LeaseDuration: r.opts.LeaseDuration, RenewDeadline: r.opts.RenewDeadline, RetryPeriod: r.opts.RetryPeriod}
	err := leader.Campaign(klog.NewContext(ctx, logger), r.kube, election, "quota engine", func(leading context.Context) error {
		enginemetrics.IsLeader.Set(1)
		defer enginemetrics.IsLeader.Set(0)
		err := r.lead(leading)
		if errors.Is(err, fence.ErrJournalInUse) {
			return fmt.Errorf("%w: %w", leader.ErrStop, err)
		}
		return err // any error gives the Lease up, so that a healthy replica takes over
	})
	if errors.Is(err, fence.ErrJournalInUse) {
		return fence.ErrJournalInUse
	}
	return err
}

// AddFlags registers the engine's flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.SystemNamespace, "system-namespace", o.SystemNamespace, "Namespace of the engine's Lease and ledger, and of the AllowanceBuckets of consumers without a namespace of their own (Organizations' buckets live in organization-<name>).")
	fs.StringSliceVar(&o.ExemptNamespaces, governed.FlagName, o.ExemptNamespaces, governed.FlagUsage)
	fs.DurationVar(&o.HoldPeriod, "hold-period", o.HoldPeriod, "How long after admission a request can still store its object; a grant whose request's end is unknown is held that long. It must exceed the API server's request timeout. Default: 70 s, or serve's --request-timeout plus 10 s.")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "How long a replica waits after the leader stops renewing before it takes over.")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "How long the leader keeps retrying to renew before it stops deciding.")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "How often replicas try to acquire or renew leadership.")
	fs.IntVar(&o.Workers, "quota-workers", o.Workers, "Parallel writers of claim decisions and buckets.")
	fs.DurationVar(&o.PolicyImpactEvery, "policy-impact-interval", o.PolicyImpactEvery, "How often a ClaimCreationPolicy generation in mode Warn or Audit is evaluated again on every existing object of its trigger kind for its status.impact (what it would charge, refuse and fail to evaluate if it came into force).")
	fs.DurationVar(&o.ExpiryWarning, "grant-expiry-warning", o.ExpiryWarning, "How long before a ResourceGrant's spec.expiresAt the grant and the buckets it counts towards are ExpiringSoon (a condition and one Warning Event each); 0 turns the warning off.")
	fs.StringArrayVar(&o.parentFlags, "consumer-parent", nil, "Where a consumer kind's parent is found, for registrations with spec.parentConsumerTypes: Kind.group=ParentKind.group:label-key, "+
		"the child naming its parent in that label (repeat for more levels). Default: Project.resourcemanager.miloapis.com=Organization.resourcemanager.miloapis.com:"+rmv1alpha1.OrganizationNameLabel+".")
}

// StableIdentity is a leader-election identity that stays the same across
// restarts of one replica (host and data directory), so that a restarted
// replica takes its own lease back at once instead of waiting for it to
// expire. Two live replicas never share one: a data directory is locked.
func StableIdentity(role, dataDir string) string {
	host, _ := os.Hostname()
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		abs = dataDir
	}
	sum := sha256.Sum256([]byte(abs))
	return fmt.Sprintf("%s-%s-%s", role, host, hex.EncodeToString(sum[:4]))
}
