// Package clientconfig finds the kubeconfig of quotaplane's client commands
// (verify, history) the way kubectl does: --kubeconfig, else the admin
// kubeconfig of --data-dir, else $KUBECONFIG, else ~/.kube/config.
package clientconfig
