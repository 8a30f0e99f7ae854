package main

import (
	"github.com/spf13/cobra"

	"github.com/quotaplane/quotaplane/config/rbac"
)

func newRBACCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "rbac",
		Short: "Print the ClusterRoles serve installs (quota viewer, user, owning service, admin; organization owner; platform admin), for: quotaplane rbac | kubectl apply -f -",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(rbac.YAML())
			return err
		},
	}
}
