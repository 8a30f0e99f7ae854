package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/grpclog"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/logs"

	"github.com/quotaplane/quotaplane/internal/verify"
	"github.com/quotaplane/quotaplane/internal/verify/repair"
	"github.com/quotaplane/quotaplane/internal/webhook"
)

func newVerifyCommand() *cobra.Command {
	o := verify.NewOptions()
	member := webhook.NewOptions()
	output := "text"
	fix := false
	timeout := 2 * time.Minute
	// exit ends the command with one of verify's exit codes.
	exit := func(code int) {
		logs.FlushLogs()
		os.Exit(code)
	}
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Audit a live quota plane: governed objects claimed, no orphan claims, buckets equal to their grants and claims, nothing held in flight past its deadline",
		Long: `verify reads everything a quota plane stores and reports where storage disagrees with itself,
with what would repair each discrepancy. It only reads, unless --repair is given: then it carries out
each repair through the engine and the API server (never by writing storage), prints each action, and
audits again. Exit codes: 0 nothing found (or all repaired), 1 discrepancies (left), 2 the audit could
not run. docs/verify.md explains each check and its repair.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "Error: verify takes no arguments, got %q\n", args)
				exit(verify.ExitCannotRun)
			}
			if output != "text" && output != "json" {
				fmt.Fprintf(cmd.ErrOrStderr(), "Error: --output %q is not text or json\n", output)
				exit(verify.ExitCannotRun)
			}
			// etcd's gRPC connections log their own teardown; the report is
			// the output, and errors still reach stderr.
			grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, os.Stderr))
			ctx := genericapiserver.SetupSignalContext()
			if member.Kubeconfig != "" {
				// A member cluster: its objects against the quota plane's
				// claims for it (docs/clusters.md).
				member.QuotaKubeconfig = o.Kubeconfig
				findings, err := webhook.Audit(ctx, member)
				if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "Error: the audit of cluster %s could not run: %v\n", member.ClusterName, err)
					exit(verify.ExitCannotRun)
				}
				webhook.PrintFindings(cmd.OutOrStdout(), member.ClusterName, findings)
				if len(findings) > 0 {
					exit(verify.ExitDiscrepancies)
				}
				return nil
			}
			var report *verify.Report
			var err error
			if fix {
				actions := cmd.OutOrStdout()
				if output == "json" {
					actions = cmd.ErrOrStderr() // stdout is the report alone
				}
				report, _, err = repair.Run(ctx, repair.Options{Options: *o, Timeout: timeout}, actions)
			} else {
				report, err = verify.Run(ctx, *o)
			}
			if err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "Error: the audit could not run: %v\n", err)
				exit(verify.ExitCannotRun)
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(report); err != nil {
					exit(verify.ExitCannotRun)
				}
			} else {
				report.Print(cmd.OutOrStdout())
			}
			if code := verify.ExitCode(report, nil); code != verify.ExitClean {
				exit(code)
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		fmt.Fprintf(c.ErrOrStderr(), "%s\nError: %v\n", c.UsageString(), err)
		exit(verify.ExitCannotRun)
		return err
	})
	o.AddFlags(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", output, "Output format: text or json.")
	cmd.Flags().BoolVar(&fix, "repair", fix, "Carry out each repair the audit names, through the engine (charge unclaimed objects, delete orphan claims and stale buckets, ask for a new engine term), then audit again. Idempotent.")
	cmd.Flags().StringVar(&member.Kubeconfig, "member-kubeconfig", "", "Audit this member cluster instead (with --cluster-name): its governed objects against the quota plane's claims for it; --kubeconfig is the quota plane's.")
	cmd.Flags().StringVar(&member.ClusterName, "cluster-name", "", "The member cluster's name in the quota plane, with --member-kubeconfig.")
	cmd.Flags().StringSliceVar(&member.ExcludeNamespaces, "exclude-namespaces", member.ExcludeNamespaces, "With --member-kubeconfig: namespaces the member's webhook leaves alone, besides the system's own.")
	cmd.Flags().DurationVar(&timeout, "repair-timeout", timeout, "With --repair, how long to wait for the engine to carry out what it is asked.")
	return cmd
}
