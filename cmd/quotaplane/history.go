package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/clientconfig"
	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/history"
)

func newHistoryCommand() *cobra.Command {
	var kubeconfig, dataDir, consumer, object, output string
	systemNamespace := engine.DefaultOptions().SystemNamespace
	cmd := &cobra.Command{
		Use:   "history",
		Short: "List the quota decisions of a consumer or about an object: grants, denials, admission refusals, releases, grant and limit changes, with the bucket's numbers then",
		Long: `history reads the decision history the quota engine keeps, per consumer, in ConfigMaps of its system
namespace (the last 100 decisions of each consumer; refusals are kept before routine grants).

  quotaplane history --data-dir .quotaplane --consumer Organization/acme
  quotaplane history --kubeconfig ~/.kube/config --object Secret/team-a/s3     # why was it refused?
  quotaplane history --object ResourceClaim/team-a/web-app-project-claim -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var q history.Query
			if consumer != "" {
				kind, name, ok := strings.Cut(consumer, "/")
				if !ok || kind == "" || name == "" {
					return fmt.Errorf("--consumer %q: want Kind/name, for example Organization/acme", consumer)
				}
				q.ConsumerKind, q.ConsumerName = kind, name
			}
			if object != "" {
				parts := strings.Split(object, "/")
				switch len(parts) {
				case 2:
					q.ObjectKind, q.ObjectName = parts[0], parts[1]
				case 3:
					q.ObjectKind, q.ObjectNamespace, q.ObjectName = parts[0], parts[1], parts[2]
				default:
					return fmt.Errorf("--object %q: want Kind/namespace/name, or Kind/name for a cluster-scoped object", object)
				}
			}
			if q.ConsumerName == "" && q.ObjectName == "" {
				return fmt.Errorf("give --consumer Kind/name, --object Kind/namespace/name, or both")
			}
			if output != "text" && output != "json" {
				return fmt.Errorf("--output %q is not text or json", output)
			}
			cfg, err := clientconfig.Load(clientconfig.Path(kubeconfig, dataDir))
			if err != nil {
				return err
			}
			kube, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			sel := history.LabelHistory + "=true"
			if q.ConsumerName != "" {
				sel += "," + history.LabelConsumerName + "=" + quotav1alpha1.ConsumerLabelValue(q.ConsumerName)
			}
			list, err := kube.CoreV1().ConfigMaps(systemNamespace).List(cmd.Context(), metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				return fmt.Errorf("listing the decision histories in %s: %w", systemNamespace, err)
			}
			rows, err := history.Select(list.Items, q)
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			if len(rows) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "no decisions recorded for that")
				return nil
			}
			history.Print(cmd.OutOrStdout(), rows)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&kubeconfig, "kubeconfig", "", "Kubeconfig of the API server; defaults to <data-dir>/admin.kubeconfig with --data-dir, else the usual kubeconfig.")
	fs.StringVar(&dataDir, "data-dir", "", "Data directory of a local quotaplane serve.")
	fs.StringVar(&systemNamespace, "system-namespace", systemNamespace, "The engine's system namespace, which holds the histories.")
	fs.StringVar(&consumer, "consumer", "", "The consumer, Kind/name (for example Organization/acme).")
	fs.StringVar(&object, "object", "", "An object, Kind/namespace/name or Kind/name: a claim, a grant, or an object whose create was charged or refused.")
	fs.StringVarP(&output, "output", "o", "text", "Output format: text or json.")
	return cmd
}
