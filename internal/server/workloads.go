package server

import (
	"fmt"

	"k8s.io/apiserver/pkg/registry/generic"
	genericapiserver "k8s.io/apiserver/pkg/server"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	controlplaneapiserver "k8s.io/kubernetes/pkg/controlplane/apiserver"
	pvcstore "k8s.io/kubernetes/pkg/registry/core/persistentvolumeclaim/storage"
	podstore "k8s.io/kubernetes/pkg/registry/core/pod/storage"
)

// withWorkloads adds Pods and PersistentVolumeClaims to the core group the
// generic control plane serves, so that quota on them — ClaimCreationPolicies
// and the built-in ResourceQuota alike — can be written and tried on serve.
// They are records only: serve has no scheduler, nodes or volumes, so a Pod
// stays Pending and a claim unbound; their logs, exec, binding and eviction
// subresources are not served.
type withWorkloads struct {
	controlplaneapiserver.RESTStorageProvider
}

func (w withWorkloads) NewRESTStorage(src serverstorage.APIResourceConfigSource, opts generic.RESTOptionsGetter) (genericapiserver.APIGroupInfo, error) {
	info, err := w.RESTStorageProvider.NewRESTStorage(src, opts)
	if err != nil {
		return info, err
	}
	storage := info.VersionedResourcesStorageMap["v1"]
	if storage == nil {
		return info, fmt.Errorf("the core group serves no v1")
	}
	pods, err := podstore.NewStorage(opts, nil, nil, nil, nil)
	if err != nil {
		return info, fmt.Errorf("pod storage: %w", err)
	}
	storage["pods"], storage["pods/status"] = pods.Pod, pods.Status
	pvcs, pvcStatus, err := pvcstore.NewREST(opts)
	if err != nil {
		return info, fmt.Errorf("persistent volume claim storage: %w", err)
	}
	storage["persistentvolumeclaims"], storage["persistentvolumeclaims/status"] = pvcs, pvcStatus
	return info, nil
}
