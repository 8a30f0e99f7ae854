package clientconfig

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
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

// ForPlane is the raw kubeconfig (as loaded, with its current context) aimed
// at the server path of a control plane: the current context's cluster is
// copied under a new name whose server URL ends with path, and made current.
// Credentials are kept as they are.
func ForPlane(explicit, name, server, path string) ([]byte, error) {
	raw, cur, cluster, err := current(explicit)
	if err != nil {
		return nil, err
	}
	c := cluster.DeepCopy()
	c.Server = strings.TrimSuffix(or(server, c.Server), "/") + path
	ctx := cur.DeepCopy()
	ctx.Cluster = name
	raw.Clusters[name] = c
	raw.Contexts[name] = ctx
	raw.CurrentContext = name
	return clientcmd.Write(raw)
}

// ForToken is a kubeconfig of its own whose one context reaches the current
// context's server (its URL ending with path, "" for the root) with that
// cluster's CA, as the user the bearer token names. Nothing of the loaded
// kubeconfig's credentials is kept.
func ForToken(explicit, name, server, path, token string) ([]byte, error) {
	_, _, cluster, err := current(explicit)
	if err != nil {
		return nil, err
	}
	c := cluster.DeepCopy()
	c.Server = strings.TrimSuffix(or(server, c.Server), "/") + path
	out := clientcmdapi.NewConfig()
	out.Clusters[name] = c
	out.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	out.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	out.CurrentContext = name
	return clientcmd.Write(*out)
}

// current is the raw kubeconfig as loaded, its current context and that
// context's cluster.
func current(explicit string) (clientcmdapi.Config, *clientcmdapi.Context, *clientcmdapi.Cluster, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = explicit
	raw, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).RawConfig()
	if err != nil {
		return raw, nil, nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	cur, ok := raw.Contexts[raw.CurrentContext]
	if !ok {
		return raw, nil, nil, errors.New("no kubeconfig with a current context: give --kubeconfig, --data-dir of a local quotaplane serve, or set $KUBECONFIG")
	}
	cluster, ok := raw.Clusters[cur.Cluster]
	if !ok {
		return raw, nil, nil, fmt.Errorf("the kubeconfig's context %s names cluster %s, which it does not define", raw.CurrentContext, cur.Cluster)
	}
	return raw, cur, cluster, nil
}

// Namespace is the current context's namespace, "" when it names none.
func Namespace(explicit string) string {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = explicit
	ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).Namespace()
	if err != nil {
		return ""
	}
	return ns
}

// or is s, or def when s is empty.
func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
