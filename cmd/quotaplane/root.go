package main

import (
	"fmt"

	"github.com/spf13/cobra"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/quotaplane/quotaplane/internal/version"
)

func init() {
	utilruntime.Must(logsapi.AddFeatureGates(utilfeature.DefaultMutableFeatureGate))
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "quotaplane",
		Short:         "A Kubernetes-native quota control plane",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	// A bad flag says where the flags are; subcommands inherit this.
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w; '%s --help' lists the flags", err, c.CommandPath())
	})
	root.AddCommand(newServeCommand(), newEtcdCommand(), newControllerCommand(), newCRDsCommand(), newRBACCommand(), newVerifyCommand(), newHistoryCommand(), newKubeconfigCommand(), newWebhookCommand(), newPortalCommand(), newWhatIfCommand(), newVersionCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of quotaplane",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), version.String())
		},
	}
}
