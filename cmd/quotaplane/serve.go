package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	genericapiserver "k8s.io/apiserver/pkg/server"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/engine/observe"
	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/quietlog"
	"github.com/quotaplane/quotaplane/internal/server"
)

func newServeCommand() *cobra.Command {
	o := server.NewOptions()
	engineOpts := engine.DefaultOptions()
	metricsOpts := observe.DefaultMetricsOptions()
	logOpts := logs.NewOptions()
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the quota API: a Kubernetes-compatible API server with embedded etcd and the quota controllers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := logsapi.ValidateAndApply(logOpts, utilfeature.DefaultFeatureGate); err != nil {
				return err
			}
			// Quiet by default: quotaplane's own messages and errors; -v
			// brings the Kubernetes libraries' messages back.
			var quiet *quietlog.Filter
			if logOpts.Verbosity == 0 {
				quiet = quietlog.Install(cmd.ErrOrStderr())
			}
			// The server's own loopback clients should not print warnings.
			rest.SetDefaultWarningHandler(rest.NoWarnings{})
			if engineOpts.Identity == "" {
				// --replica-identity names the replica in every Lease.
				engineOpts.Identity = o.KubeControllers.Identity
			}
			if engineOpts.Identity == "" {
				engineOpts.Identity = engine.StableIdentity("serve", o.DataDir)
			}
			o.Identity = engineOpts.Identity
			// A grant is held until its request can no longer store its
			// object: past the request timeout, with 10 s for a write in
			// flight (docs/exactly-once.md).
			switch {
			case engineOpts.HoldPeriod == 0:
				engineOpts.HoldPeriod = o.RequestTimeout + 10*time.Second
			case engineOpts.HoldPeriod <= o.RequestTimeout:
				return fmt.Errorf("--hold-period %s must exceed --request-timeout %s: a grant released before its request can no longer store the object could leave it uncharged", engineOpts.HoldPeriod, o.RequestTimeout)
			}
			engineOpts.Handle = route.NewHandle()
			o.QuotaEngine, o.SystemNamespace = engineOpts.Handle, engineOpts.SystemNamespace
			o.ExemptNamespaces = engineOpts.ExemptNamespaces
			// One set of --leader-elect-* flags tunes both Leases.
			le := &o.KubeControllers
			le.LeaseDuration, le.RenewDeadline, le.RetryPeriod = engineOpts.LeaseDuration, engineOpts.RenewDeadline, engineOpts.RetryPeriod
			engineOpts.Exporter = observe.NewExporter(metricsOpts)
			o.QuotaMetrics = engineOpts.Exporter
			ctx := genericapiserver.SetupSignalContext()
			go func() {
				<-ctx.Done()
				quiet.Stopping()
			}()
			err := server.Serve(ctx, o, server.QuotaComponents(engineOpts), readyWriter{cmd.OutOrStdout(), quiet})
			if err != nil {
				quiet.Failed()
			}
			return err
		},
	}
	o.AddFlags(cmd.Flags())
	engineOpts.AddFlags(cmd.Flags())
	addEngineTestFlags(cmd.Flags(), &engineOpts) // none in the shipped binary (testhooks_off.go)
	metricsOpts.AddFlags(cmd.Flags())
	logsapi.AddFlags(logOpts, cmd.Flags())
	return cmd
}

// readyWriter receives serve's banner, written once the server is ready: the
// end of start-up for the quiet log.
type readyWriter struct {
	io.Writer
	quiet *quietlog.Filter
}

func (w readyWriter) Write(p []byte) (int, error) {
	n, err := w.Writer.Write(p)
	w.quiet.Ready()
	return n, err
}
