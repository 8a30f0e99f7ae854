package planes

import (
	"context"
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// TestEndpointSlicesAtTheRootAndInPlanes: discovery.k8s.io/v1, which a
// Kubernetes control plane serves its clients, is served at the root and
// in every plane (the reference's structured-type scenario starts with an
// EndpointSlice); a plane's EndpointSlices are its own.
func TestEndpointSlicesAtTheRootAndInPlanes(t *testing.T) {
	ctx := context.Background()
	tn := newTenant(t, "eps-org", "eps-owner")
	tn.project(t, "eps-web")
	plane := planeConfig(srv.Config, projectPlane("eps-web"))
	for where, cfg := range map[string]*rest.Config{"the root": srv.Config, "the plane of Project eps-web": plane} {
		kc := kubernetes.NewForConfigOrDie(cfg)
		res, err := kc.Discovery().ServerResourcesForGroupVersion(discoveryv1.SchemeGroupVersion.String())
		if err != nil {
			t.Fatalf("discovery of %s at %s: %v", discoveryv1.SchemeGroupVersion, where, err)
		}
		var names []string
		for _, r := range res.APIResources {
			names = append(names, r.Name)
		}
		if !slices.Contains(names, "endpointslices") {
			t.Errorf("%s serves %v in %s; want endpointslices", where, names, discoveryv1.SchemeGroupVersion)
		}
	}
	eps := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80)}}}
	inPlane := kubernetes.NewForConfigOrDie(plane).DiscoveryV1().EndpointSlices("default")
	_, err := inPlane.Create(ctx, eps, metav1.CreateOptions{})
	must(t, err, "creating an EndpointSlice in the project's plane")
	got, err := inPlane.Get(ctx, eps.Name, metav1.GetOptions{})
	must(t, err, "reading it back in the plane")
	if len(got.Endpoints) != 1 || got.Endpoints[0].Addresses[0] != "10.0.0.1" {
		t.Errorf("the EndpointSlice read back: %+v", got.Endpoints)
	}
	root := kubernetes.NewForConfigOrDie(srv.Config).DiscoveryV1().EndpointSlices("default")
	if _, err := root.Get(ctx, eps.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the plane's EndpointSlice read at the root: %v; want NotFound (a plane's objects are its own)", err)
	}
}
