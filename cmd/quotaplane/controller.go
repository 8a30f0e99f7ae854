package main

import (
	"github.com/spf13/cobra"
	genericapiserver "k8s.io/apiserver/pkg/server"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/engine/observe"
	"github.com/quotaplane/quotaplane/internal/standalone"
)

func newControllerCommand() *cobra.Command {
	o := standalone.NewOptions()
	engineOpts := engine.DefaultOptions()
	metricsOpts := observe.DefaultMetricsOptions()
	logOpts := logs.NewOptions()
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the quota controllers against any Kubernetes API server where the quota CRDs are installed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := logsapi.ValidateAndApply(logOpts, utilfeature.DefaultFeatureGate); err != nil {
				return err
			}
			engineOpts.Exporter = observe.NewExporter(metricsOpts)
			return standalone.Run(genericapiserver.SetupSignalContext(), o, engineOpts)
		},
	}
	o.AddFlags(cmd.Flags())
	engineOpts.AddFlags(cmd.Flags())
	addEngineTestFlags(cmd.Flags(), &engineOpts) // none in the shipped binary (testhooks_off.go)
	metricsOpts.AddFlags(cmd.Flags())
	logsapi.AddFlags(logOpts, cmd.Flags())
	return cmd
}
