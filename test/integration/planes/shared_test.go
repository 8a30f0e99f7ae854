package planes

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// The quota group's tenant-private and staff's kinds are not served in
// planes: a project member (a real token, the shipped member role) reads no
// other organization's QuotaRequest in its plane — not by list across
// namespaces, watch or get by namespace and name — nor approval rules or
// policies; neither does system:masters there. Registrations, the
// platform's catalog, are still read there, and the plane's own claims,
// grants and buckets in its system namespace (issue 33, hole 6).
func TestQuotaRequestsAreNotSharedIntoPlanes(t *testing.T) {
	ctx := context.Background()
	a := newTenant(t, "qreq-a", "qreq-a-owner")
	a.project(t, "qreq-a-web")
	newTenant(t, "qreq-b", "qreq-b-owner")
	member := memberConfig(t, "qreq-a", "qreq-a-web", "dev")

	// Organization qreq-b asks for quota at the root.
	admin := quotatest.NewClient(t, srv.Config)
	const rt = "qreq.example.com/vcpus"
	must(t, admin.Create(ctx, &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: "qreq-vcpus"},
		Spec: quotav1alpha1.ResourceRegistrationSpec{ConsumerType: quotav1alpha1.ConsumerTypeRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization"},
			Type: quotav1alpha1.RegistrationTypeAllocation, ResourceType: rt, BaseUnit: "unit"}}), "registering %s", rt)
	qr := &quotav1alpha1.QuotaRequest{ObjectMeta: metav1.ObjectMeta{Name: "secret-launch", Namespace: rmv1alpha1.OrganizationNamespace("qreq-b")},
		Spec: quotav1alpha1.QuotaRequestSpec{ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: "qreq-b"},
			ResourceType: rt, RequestedLimit: 30, Justification: "qreq-b's unannounced launch", Contact: "cfo@qreq-b.example"}}
	must(t, admin.Create(ctx, qr), "creating organization qreq-b's QuotaRequest at the root")
	rule := &quotav1alpha1.QuotaApprovalRule{ObjectMeta: metav1.ObjectMeta{Name: "qreq-small"},
		Spec: quotav1alpha1.QuotaApprovalRuleSpec{ResourceTypes: []quotav1alpha1.ResourceType{rt}, Expression: "request.spec.requestedLimit <= 1"}}
	must(t, admin.Create(ctx, rule), "creating a QuotaApprovalRule")

	gvr := func(resource string) schema.GroupVersionResource {
		return quotav1alpha1.SchemeGroupVersion.WithResource(resource)
	}
	notServed := func(who, what string, err error, list *unstructured.UnstructuredList) {
		t.Helper()
		if list != nil {
			for _, i := range list.Items {
				if i.GetNamespace() != planes.SystemNamespace || strings.HasPrefix(i.GetName(), "secret-launch") || i.GetName() == rule.Name {
					t.Errorf("%s %s in a plane and read %s/%s", who, what, i.GetNamespace(), i.GetName())
				}
			}
		}
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "not served in control planes") {
			t.Errorf("%s %s in a plane: want Forbidden saying they are not served in control planes, got %v", who, what, err)
		}
	}
	for who, cfg := range map[string]*rest.Config{"a project member": member, "system:masters": srv.Config} {
		dyn := dynamic.NewForConfigOrDie(planeConfig(cfg, projectPlane("qreq-a-web")))
		list, err := dyn.Resource(gvr("quotarequests")).List(ctx, metav1.ListOptions{})
		notServed(who, "listed quotarequests in every namespace", err, list)
		list, err = dyn.Resource(gvr("quotarequests")).Namespace(planes.SystemNamespace).List(ctx, metav1.ListOptions{})
		notServed(who, "listed quotarequests in "+planes.SystemNamespace, err, list)
		got, err := dyn.Resource(gvr("quotarequests")).Namespace(qr.Namespace).Get(ctx, qr.Name, metav1.GetOptions{})
		if got != nil {
			notServed(who, "got "+qr.Namespace+"/"+qr.Name, err, &unstructured.UnstructuredList{Items: []unstructured.Unstructured{*got}})
		} else {
			notServed(who, "got "+qr.Namespace+"/"+qr.Name, err, nil)
		}
		if w, err := dyn.Resource(gvr("quotarequests")).Watch(ctx, metav1.ListOptions{}); err == nil {
			w.Stop()
			t.Errorf("%s watched quotarequests in every namespace in a plane", who)
		} else {
			notServed(who, "watched quotarequests", err, nil)
		}
		for _, resource := range []string{"quotaapprovalrules", "claimcreationpolicies", "grantcreationpolicies"} {
			list, err := dyn.Resource(gvr(resource)).List(ctx, metav1.ListOptions{})
			notServed(who, "listed "+resource, err, list)
		}
		// Still served: the platform's catalog and the plane's own quota
		// objects.
		if _, err := dyn.Resource(gvr("resourceregistrations")).List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("%s listing resourceregistrations in a plane: %v", who, err)
		}
		for _, resource := range []string{"resourceclaims", "resourcegrants", "allowancebuckets"} {
			if _, err := dyn.Resource(gvr(resource)).Namespace(planes.SystemNamespace).List(ctx, metav1.ListOptions{}); err != nil {
				t.Errorf("%s listing %s in the plane's %s: %v", who, resource, planes.SystemNamespace, err)
			}
		}
	}
	// The organization's owner reads its requests at the root, not in its
	// organization's plane either.
	owner := quotatest.NewClient(t, impersonating(srv.Config, "qreq-b-owner"))
	must(t, owner.Get(ctx, client.ObjectKey{Namespace: qr.Namespace, Name: qr.Name}, &quotav1alpha1.QuotaRequest{}), "the owner reading its request at the root")
	dyn := dynamic.NewForConfigOrDie(planeConfig(impersonating(srv.Config, "qreq-b-owner"), orgPlane("qreq-b")))
	_, err := dyn.Resource(gvr("quotarequests")).Namespace(planes.SystemNamespace).List(ctx, metav1.ListOptions{})
	notServed("the organization's owner", "listed quotarequests in its organization's", err, nil)
}
