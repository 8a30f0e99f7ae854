package main

import (
	"github.com/spf13/cobra"

	"github.com/quotaplane/quotaplane/config/crd"
)

func newCRDsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "crds",
		Short: "Print the quota and tenancy CRDs (quota.miloapis.com, resourcemanager.miloapis.com), for: quotaplane crds | kubectl apply -f -",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, err := crd.YAML()
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(data)
			return err
		},
	}
}
