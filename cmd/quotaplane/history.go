package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/clientconfig"
	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/history"
	"github.com/quotaplane/quotaplane/internal/planes"
)

func newHistoryCommand() *cobra.Command {
	var kubeconfig, dataDir, consumer, object, output, controlPlane string
	systemNamespace := engine.DefaultOptions().SystemNamespace
	cmd := &cobra.Command{
		Use:   "history",
		Short: "List the quota decisions of a consumer or about an object: grants, denials, admission refusals, releases, grant and limit changes, with the bucket's numbers then",
		Long: `history reads the decision history the quota engine keeps, per consumer, in ConfigMaps of its system
namespace (the last 100 decisions of each consumer; refusals are kept before routine grants).

  quotaplane history --data-dir .quotaplane --consumer Organization/acme
  quotaplane history --kubeconfig ~/.kube/config --object Secret/team-a/s3     # why was it refused?
  quotaplane history --object resourceclaims/team-a/web-app-project-claim -o json
  quotaplane history --control-plane projects/web --object Secret/default/db   # in a project's control plane

By default the table fits 120 columns; -o wide adds what was requested, the buckets' numbers then and
the policy. Kinds are written as kubectl takes them: Kind, singular, plural, short name or kind.group.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var q history.Query
			var consumerKind, objectKind string
			if consumer != "" {
				kind, name, ok := strings.Cut(consumer, "/")
				if !ok || kind == "" || name == "" {
					return fmt.Errorf("--consumer %q: want kind/name, for example Organization/acme or organizations/acme", consumer)
				}
				consumerKind, q.ConsumerName = kind, name
			}
			if object != "" {
				parts := strings.Split(object, "/")
				switch len(parts) {
				case 2:
					objectKind, q.ObjectName = parts[0], parts[1]
				case 3:
					objectKind, q.ObjectNamespace, q.ObjectName = parts[0], parts[1], parts[2]
				default:
					return fmt.Errorf("--object %q: want kind/namespace/name, or kind/name for a cluster-scoped object", object)
				}
			}
			if controlPlane != "" {
				p, err := planes.Parse(controlPlane)
				if err != nil {
					return fmt.Errorf("--control-plane: %w", err)
				}
				q.Namespace = p.QuotaNamespace()
			}
			if q.ConsumerName == "" && q.ObjectName == "" && q.Namespace == "" {
				return fmt.Errorf("give --consumer kind/name, --object kind/namespace/name, --control-plane projects/<name>, or several")
			}
			switch output {
			case "", "text", "wide", "json", "yaml":
			default:
				return fmt.Errorf("--output %q: want wide, json or yaml (or nothing, for a table that fits 120 columns)", output)
			}
			cfg, err := clientconfig.Load(clientconfig.Path(kubeconfig, dataDir))
			if err != nil {
				return err
			}
			kube, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			// Kinds as kubectl takes them: Kind, singular, plural, short
			// name, or resource.group.
			kinds := newKindResolver(kube.Discovery())
			if consumerKind != "" {
				if q.ConsumerKind, err = kinds.resolve(consumerKind); err != nil {
					return fmt.Errorf("--consumer %q: %w", consumer, err)
				}
			}
			if objectKind != "" {
				if q.ObjectKind, err = kinds.resolve(objectKind); err != nil {
					return fmt.Errorf("--object %q: %w", object, err)
				}
			}
			histories := kube.CoreV1().ConfigMaps(systemNamespace)
			all := history.LabelHistory + "=true"
			sel := all
			if q.ConsumerName != "" {
				sel += "," + history.LabelConsumerName + "=" + quotav1alpha1.ConsumerLabelValue(q.ConsumerName)
			}
			list, err := histories.List(cmd.Context(), metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				return fmt.Errorf("listing the decision histories in %s: %w", systemNamespace, err)
			}
			rows, err := history.Select(list.Items, q)
			if err != nil {
				return err
			}
			switch output {
			case "json":
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			case "yaml":
				out, err := yaml.Marshal(rows)
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(out)
				return err
			}
			if len(rows) == 0 {
				everything := list
				if sel != all {
					if everything, err = histories.List(cmd.Context(), metav1.ListOptions{LabelSelector: all}); err != nil {
						return fmt.Errorf("listing the decision histories in %s: %w", systemNamespace, err)
					}
				}
				fmt.Fprintln(cmd.ErrOrStderr(), history.Explain(list.Items, everything.Items, q))
				return nil
			}
			if output == "wide" {
				history.Print(cmd.OutOrStdout(), rows)
				return nil
			}
			history.PrintShort(cmd.OutOrStdout(), rows, history.Width, q.ConsumerName != "")
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&kubeconfig, "kubeconfig", "", "Kubeconfig of the API server; defaults to <data-dir>/admin.kubeconfig with --data-dir, else the usual kubeconfig.")
	fs.StringVar(&dataDir, "data-dir", "", "Data directory of a local quotaplane serve.")
	fs.StringVar(&systemNamespace, "system-namespace", systemNamespace, "The engine's system namespace, which holds the histories.")
	fs.StringVar(&consumer, "consumer", "", "The consumer, kind/name; the kind as kubectl takes it (Organization/acme, organizations/acme, organization.resourcemanager.miloapis.com/acme).")
	fs.StringVar(&object, "object", "", "An object, kind/namespace/name or kind/name: a claim, a grant, or an object whose create was charged or refused (Secret/team-a/s3, machines/web/m1).")
	fs.StringVar(&controlPlane, "control-plane", "", "Only decisions about a control plane's objects: projects/<name> or organizations/<name> (docs/control-planes.md); --object then names an object of that plane.")
	fs.StringVarP(&output, "output", "o", "", "Output format: wide (every column: requests, the buckets' numbers, the policy), json or yaml; by default a table that fits 120 columns.")
	return cmd
}
