package server

import (
	"fmt"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apiserver/pkg/registry/generic"
	genericapiserver "k8s.io/apiserver/pkg/server"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	_ "k8s.io/kubernetes/pkg/apis/discovery/install" // the internal discovery types in the legacy scheme
	controlplaneapiserver "k8s.io/kubernetes/pkg/controlplane/apiserver"
	discoveryrest "k8s.io/kubernetes/pkg/registry/discovery/rest"
)

// discoveryPriority is how the aggregator orders discovery.k8s.io/v1,
// kube-apiserver's.
var discoveryPriority = controlplaneapiserver.APIServicePriority{Group: 16200, Version: 15}

// discoveryRecords serves discovery.k8s.io/v1 EndpointSlices from
// upstream's REST storage, at the root and in every plane: clients of a
// Kubernetes control plane expect the group (and quota on a structured
// built-in kind, with a claim name of its own, is tried on it). As with
// Pods, serve runs no controller that writes them: an EndpointSlice is
// what its writer stored. The generic control plane leaves the group out.
type discoveryRecords struct{}

func (discoveryRecords) GroupName() string { return discoveryv1.GroupName }

func (discoveryRecords) NewRESTStorage(_ serverstorage.APIResourceConfigSource, opts generic.RESTOptionsGetter) (genericapiserver.APIGroupInfo, error) {
	enabled := serverstorage.NewResourceConfig()
	enabled.EnableResources(discoveryv1.SchemeGroupVersion.WithResource("endpointslices"))
	info, err := discoveryrest.StorageProvider{}.NewRESTStorage(enabled, opts)
	if err != nil {
		return info, fmt.Errorf("discovery.k8s.io/v1 storage: %w", err)
	}
	if len(info.VersionedResourcesStorageMap["v1"]) == 0 {
		return info, fmt.Errorf("discovery.k8s.io/v1 storage: upstream's provider built no endpointslices")
	}
	return info, nil
}
