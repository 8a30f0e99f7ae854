package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"

	"github.com/quotaplane/quotaplane/internal/clientconfig"
	"github.com/quotaplane/quotaplane/internal/planes"
)

func newKubeconfigCommand() *cobra.Command {
	var kubeconfig, dataDir, project, organization string
	cmd := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print a kubeconfig for the control plane of a project or organization",
		Long: `kubeconfig prints a kubeconfig whose current context reaches the control plane of a project (or an
organization) served by quotaplane serve: the same credentials, the plane's URL. kubectl needs nothing else.

  quotaplane kubeconfig --data-dir .quotaplane --project web > web.kubeconfig
  kubectl --kubeconfig web.kubeconfig get namespaces
  quotaplane kubeconfig --kubeconfig ~/.kube/config --organization acme

See docs/control-planes.md for who may use a plane.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var p planes.Plane
			switch {
			case project != "" && organization != "":
				return fmt.Errorf("give --project or --organization, not both")
			case project != "":
				p = planes.Plane{Kind: planes.Projects, Name: project}
			case organization != "":
				p = planes.Plane{Kind: planes.Organizations, Name: organization}
			default:
				return fmt.Errorf("give --project <name> or --organization <name>: the control plane to reach")
			}
			path := clientconfig.Path(kubeconfig, dataDir)
			cfg, err := clientconfig.Load(path)
			if err != nil {
				return err
			}
			dyn, err := dynamic.NewForConfig(cfg)
			if err != nil {
				return err
			}
			if err := planes.Find(cmd.Context(), dyn, p); err != nil {
				return err
			}
			out, err := clientconfig.ForPlane(path, string(p.Kind)+"-"+p.Name, p.Path())
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "the kubeconfig of the server (default: --data-dir's, $KUBECONFIG, ~/.kube/config)")
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "the data directory of a local quotaplane serve (its admin.kubeconfig)")
	cmd.Flags().StringVar(&project, "project", "", "the project whose control plane to reach")
	cmd.Flags().StringVar(&organization, "organization", "", "the organization whose control plane to reach")
	return cmd
}
