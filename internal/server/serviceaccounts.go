package server

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/kubernetes/pkg/serviceaccount"
)

// tokenGetter lets service-account tokens authenticate on a control plane
// that has no nodes and runs no pods. It reads the informers' caches and,
// on a miss, the server itself, as kube-apiserver's getter does: a token
// issued for a service account created a moment ago authenticates before
// the cache has seen the account (under load, CI saw 401 for it).
type tokenGetter struct {
	secrets         corelisters.SecretLister
	serviceAccounts corelisters.ServiceAccountLister
	// live reads what the caches have not seen yet; it is the loopback
	// client, set once the server's configuration has one, before serving.
	live kubernetes.Interface
}

// tokenGetterFor returns the getter the authenticator is given and the
// getter itself, whose live client is set later.
func tokenGetterFor() (func(informers.SharedInformerFactory) serviceaccount.ServiceAccountTokenGetter, *tokenGetter) {
	g := &tokenGetter{}
	return func(f informers.SharedInformerFactory) serviceaccount.ServiceAccountTokenGetter {
		g.secrets, g.serviceAccounts = f.Core().V1().Secrets().Lister(), f.Core().V1().ServiceAccounts().Lister()
		return g
	}, g
}

func (g *tokenGetter) GetServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	sa, err := g.serviceAccounts.ServiceAccounts(namespace).Get(name)
	if err == nil || g.live == nil {
		return sa, err
	}
	return g.live.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (g *tokenGetter) GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	s, err := g.secrets.Secrets(namespace).Get(name)
	if err == nil || g.live == nil {
		return s, err
	}
	return g.live.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (g *tokenGetter) GetPod(_ context.Context, _, name string) (*corev1.Pod, error) {
	return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
}

func (g *tokenGetter) GetNode(_ context.Context, name string) (*corev1.Node, error) {
	return nil, apierrors.NewNotFound(corev1.Resource("nodes"), name)
}
