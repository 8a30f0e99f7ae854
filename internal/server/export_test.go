package server

import (
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/pkg/serviceaccount"
)

// TokenGetter is serve's service-account token getter over f's listers,
// reading live through client on a miss.
func TokenGetter(f informers.SharedInformerFactory, client kubernetes.Interface) serviceaccount.ServiceAccountTokenGetter {
	getter, g := tokenGetterFor()
	g.live = client
	return getter(f)
}
