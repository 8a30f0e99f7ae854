package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/logs"

	"github.com/quotaplane/quotaplane/internal/clientconfig"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/whatif"
	"github.com/quotaplane/quotaplane/pkg/client/clientset/versioned"
)

func newWhatIfCommand() *cobra.Command {
	var kubeconfig, dataDir, output, controlPlane, policyFile string
	var files []string
	var o whatif.Options
	exit := func(code int) {
		logs.FlushLogs()
		os.Exit(code)
	}
	fail := func(cmd *cobra.Command, err error) {
		fmt.Fprintf(cmd.ErrOrStderr(), "Error: %v\n", err)
		exit(whatif.ExitError)
	}
	cmd := &cobra.Command{
		Use:   "what-if -f DIR|FILE|-",
		Short: "Say whether a set of manifests fits the quota, all together and at every level, before applying any of it; nothing is taken",
		Long: `what-if sends the manifests to quotaplane serve as one QuotaReview: each object is reviewed as
applying them one by one, in order, would be admitted (an object that exists as the update applying it
would be), with the same policies, authorization and engine as admission, and nothing is taken
(docs/what-if.md). Files are read as kubectl apply -f reads them: a directory's .yaml, .yml and .json
files in lexical order, lists expanded; - reads standard input.

  quotaplane what-if -f deploy/                       # a table: each object, each level, the verdict
  quotaplane what-if -f app.yaml -o json              # for pipelines
  kustomize build . | quotaplane what-if -f -
  quotaplane what-if -f app.yaml --control-plane projects/web   # in a project's control plane

With --policy, what-if previews a ClaimCreationPolicy instead (new, or an edit of the one of its name):
it is evaluated against every object of its trigger kind that exists, and the table shows, per consumer,
usage against limit now and if it came into force, the objects it would refuse or cannot evaluate, and
the consumers it would put over (docs/admission.md, "Rolling out a policy"). It needs the right to
create ClaimCreationPolicies.

  quotaplane what-if --policy policy.yaml

Exit status: 0 every object fits, 1 at least one would be refused (or, with --policy, not fit or not be
evaluated), 2 the review could not be made.`,
		Args: cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			switch {
			case policyFile != "" && (len(files) > 0 || controlPlane != "" || o.User != ""):
				fail(cmd, fmt.Errorf("--policy previews a policy against every object that exists, at the root: it takes no -f, --control-plane or --as"))
			case policyFile == "" && len(files) == 0:
				fail(cmd, fmt.Errorf("give the manifests with -f (a file, a directory, or - for standard input), or a ClaimCreationPolicy to preview with --policy"))
			}
			if output != "" && output != "table" && output != "json" {
				fail(cmd, fmt.Errorf("--output %q: want table or json", output))
			}
			path := clientconfig.Path(kubeconfig, dataDir)
			if policyFile != "" {
				cp, err := whatif.ReadPolicy(policyFile, cmd.InOrStdin())
				if err != nil {
					fail(cmd, err)
				}
				cfg, err := clientconfig.Load(path)
				if err != nil {
					fail(cmd, err)
				}
				c, err := versioned.NewForConfig(cfg)
				if err != nil {
					fail(cmd, err)
				}
				r, err := whatif.PreviewPolicy(cmd.Context(), c, cp)
				if err != nil {
					fail(cmd, err)
				}
				if output == "json" {
					err = whatif.PrintJSON(cmd.OutOrStdout(), r)
				} else {
					err = whatif.PrintPolicyTable(cmd.OutOrStdout(), r, readUnits(cmd, c))
				}
				if err != nil {
					fail(cmd, err)
				}
				exit(whatif.ExitCode(r))
			}
			objs, srcs, err := whatif.Read(files, cmd.InOrStdin())
			if err != nil {
				fail(cmd, err)
			}
			cfg, err := clientconfig.Load(path)
			if err != nil {
				fail(cmd, err)
			}
			if controlPlane != "" {
				p, err := planes.Parse(controlPlane)
				if err != nil {
					fail(cmd, fmt.Errorf("--control-plane: %w", err))
				}
				cfg = planes.ConfigFor(cfg, p)
			}
			if o.Namespace == "" {
				o.Namespace = clientconfig.Namespace(path)
			}
			c, err := versioned.NewForConfig(cfg)
			if err != nil {
				fail(cmd, err)
			}
			r, err := whatif.Review(cmd.Context(), c, objs, o)
			if err != nil {
				fail(cmd, err)
			}
			if output == "json" {
				err = whatif.PrintJSON(cmd.OutOrStdout(), r)
			} else {
				err = whatif.PrintTable(cmd.OutOrStdout(), r, srcs, readUnits(cmd, c))
			}
			if err != nil {
				fail(cmd, err)
			}
			exit(whatif.ExitCode(r))
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "manifests to review: a file, a directory (its .yaml, .yml and .json files), or - for standard input; repeatable")
	cmd.Flags().StringVarP(&o.Namespace, "namespace", "n", "", "namespace of the objects that name none (default: the kubeconfig context's, else default)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json (the review's status)")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the quota plane (default $KUBECONFIG, ~/.kube/config)")
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "data directory of a local quotaplane serve (its admin kubeconfig)")
	cmd.Flags().StringVar(&controlPlane, "control-plane", "", "review in a control plane: organizations/<name> or projects/<name>")
	cmd.Flags().StringVar(&policyFile, "policy", "", "preview the ClaimCreationPolicy of this file (or - for standard input) against every object that exists, instead of reviewing manifests")
	cmd.Flags().StringVar(&o.User, "as", "", "review as this user (needs impersonate on it)")
	cmd.Flags().StringArrayVar(&o.Groups, "as-group", nil, "groups of --as (each needs impersonate); repeatable")
	return cmd
}

// readUnits reads the units amounts are written in; without them (a user
// who may not list ResourceRegistrations) amounts are numbers of base
// units, and a warning says so.
func readUnits(cmd *cobra.Command, c versioned.Interface) whatif.Units {
	units, err := whatif.ReadUnits(cmd.Context(), c)
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "Warning: amounts are shown as numbers of base units: %v\n", err)
	}
	return units
}
