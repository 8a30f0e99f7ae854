// Package clientconfig finds the kubeconfig of quotaplane's client commands
// (verify, history, kubeconfig) the way kubectl does: --kubeconfig, else the
// admin kubeconfig of --data-dir, else $KUBECONFIG, else ~/.kube/config; and
// writes the kubeconfigs `quotaplane kubeconfig` prints from it.
package clientconfig
