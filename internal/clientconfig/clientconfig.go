package clientconfig

import (
	"errors"
	"fmt"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Path is the explicit kubeconfig: the one given, else the admin kubeconfig
// of dataDir; "" when neither is given.
func Path(kubeconfig, dataDir string) string {
	if kubeconfig == "" && dataDir != "" {
		return filepath.Join(dataDir, "admin.kubeconfig")
	}
	return kubeconfig
}

// Load reads the kubeconfig: the explicit path when given, else $KUBECONFIG,
// else ~/.kube/config, with their current context.
func Load(explicit string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = explicit
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	switch {
	case clientcmd.IsEmptyConfig(err) || errors.Is(err, clientcmd.ErrEmptyConfig):
		return nil, errors.New("no kubeconfig: give --kubeconfig, --data-dir of a local quotaplane serve, or set $KUBECONFIG")
	case err != nil && explicit != "":
		return nil, fmt.Errorf("reading the kubeconfig %s: %w", explicit, err)
	case err != nil:
		return nil, fmt.Errorf("reading the kubeconfig ($KUBECONFIG or ~/.kube/config): %w", err)
	}
	return cfg, nil
}
