package server

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apiserver/pkg/registry/generic"
	genericapiserver "k8s.io/apiserver/pkg/server"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	_ "k8s.io/kubernetes/pkg/apis/apps/install" // the internal apps types in the legacy scheme
	controlplaneapiserver "k8s.io/kubernetes/pkg/controlplane/apiserver"
	appsrest "k8s.io/kubernetes/pkg/registry/apps/rest"
	pvcstore "k8s.io/kubernetes/pkg/registry/core/persistentvolumeclaim/storage"
	podstore "k8s.io/kubernetes/pkg/registry/core/pod/storage"
)

// withWorkloadProviders returns the generic control plane's storage
// providers with the core group's wrapped in withWorkloads and the apps/v1
// group (appsRecords) and discovery.k8s.io/v1 (discoveryRecords) added.
func withWorkloadProviders(providers []controlplaneapiserver.RESTStorageProvider) []controlplaneapiserver.RESTStorageProvider {
	out := make([]controlplaneapiserver.RESTStorageProvider, 0, len(providers)+1)
	for _, p := range providers {
		if p.GroupName() == "" {
			p = withWorkloads{p}
		}
		out = append(out, p)
	}
	return append(out, appsRecords{}, discoveryRecords{})
}

// withWorkloads adds Pods and PersistentVolumeClaims to the core group the
// generic control plane serves, so that quota on them — ClaimCreationPolicies
// and the built-in ResourceQuota alike — can be written and tried on serve.
// They are records only: serve has no scheduler, nodes or volumes, so a Pod
// stays Pending and a claim unbound; their logs, exec, binding and eviction
// subresources are not served.
//
// appsRecords does the same for the apps/v1 group: Deployments, ReplicaSets,
// StatefulSets and DaemonSets are stored, validated, defaulted and charged
// like on any cluster, but serve runs none of their controllers, so a
// Deployment never creates a ReplicaSet nor a ReplicaSet a Pod, and their
// status stays what its writer last put there.
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

// appsResources are the apps/v1 resources serve stores, with their status
// and, where upstream has one, scale subresources. ControllerRevisions are
// left out: only the controllers serve does not run write them.
var appsResources = []string{"deployments", "replicasets", "statefulsets", "daemonsets"}

// appsPriority is how the aggregator orders apps/v1, kube-apiserver's
// (cmd/kube-apiserver/app/aggregator.go); with it the aggregator registers
// the group's APIService itself, so that the plain /apis list names it.
var appsPriority = controlplaneapiserver.APIServicePriority{Group: 17800, Version: 15}

// appsRecords serves the apps/v1 workloads from upstream's REST storage.
// The generic control plane's resource configuration leaves the group out,
// so appsRecords enables exactly appsResources for upstream's provider.
type appsRecords struct{}

func (appsRecords) GroupName() string { return appsv1.GroupName }

func (appsRecords) NewRESTStorage(_ serverstorage.APIResourceConfigSource, opts generic.RESTOptionsGetter) (genericapiserver.APIGroupInfo, error) {
	enabled := serverstorage.NewResourceConfig()
	for _, r := range appsResources {
		enabled.EnableResources(appsv1.SchemeGroupVersion.WithResource(r))
	}
	info, err := appsrest.StorageProvider{}.NewRESTStorage(enabled, opts)
	if err != nil {
		return info, fmt.Errorf("apps/v1 storage: %w", err)
	}
	if len(info.VersionedResourcesStorageMap["v1"]) == 0 {
		return info, fmt.Errorf("apps/v1 storage: upstream's provider built none of %v", appsResources)
	}
	return info, nil
}
