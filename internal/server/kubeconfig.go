package server

import (
	"fmt"
	"os"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeAdminKubeconfig writes <data-dir>/admin.kubeconfig: the admin client
// certificate, the CA, and the address this server serves at.
func writeAdminKubeconfig(o CompletedOptions, caFile, certFile, keyFile string) error {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	cert, err := os.ReadFile(certFile)
	if err != nil {
		return err
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["quotaplane"] = &clientcmdapi.Cluster{Server: "https://" + o.kubeconfigServerHost(), CertificateAuthorityData: ca}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts["quotaplane"] = &clientcmdapi.Context{Cluster: "quotaplane", AuthInfo: "admin"}
	cfg.CurrentContext = "quotaplane"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	path := o.kubeconfigPath()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}
