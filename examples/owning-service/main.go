// Command owning-service is a small, real owning service built on
// quotaplane's claim library (pkg/quotaclaim, docs/owning-services.md): a
// controller for Instances (compute.example.com/v1alpha1), a kind of its own
// it installs as a CRD. For each Instance it ensures one claim (cpus and one
// instance) charged to the Instance's organization, provisions the machine —
// a ConfigMap standing for it — only once the claim is Granted, keeps the
// Instance Pending "waiting for quota" while it is denied, and starts it as
// soon as the engine grants it (a grant raised, a QuotaRequest approved).
// Deleting an Instance releases its claim through its ownerReference.
//
//	owning-service --kubeconfig .quotaplane/admin.kubeconfig
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/quotaplane/quotaplane/examples/owning-service/compute"
	"github.com/quotaplane/quotaplane/pkg/client/clientset/versioned"
	"github.com/quotaplane/quotaplane/pkg/quotaclaim"
)

func main() {
	// --kubeconfig (or $KUBECONFIG) names the quotaplane server: the root,
	// or a plane's kubeconfig (controller-runtime's flag).
	klog.InitFlags(nil)
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "owning-service:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("reading the kubeconfig (--kubeconfig, $KUBECONFIG): %w", err)
	}
	if err := compute.InstallCRD(ctx, apiextensionsclient.NewForConfigOrDie(cfg)); err != nil {
		return err
	}
	me, err := quotaclaim.WhoAmI(ctx, cfg)
	if err != nil {
		return err
	}
	ctrl.SetLogger(klog.NewKlogr())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: compute.NewScheme(), Metrics: server.Options{BindAddress: "0"}})
	if err != nil {
		return fmt.Errorf("creating the controller manager: %w", err)
	}
	if err := compute.Setup(mgr, versioned.NewForConfigOrDie(cfg), me); err != nil {
		return err
	}
	fmt.Println("owning-service is running: Instances (compute.example.com) are reconciled")
	return mgr.Start(ctx)
}
