package compute

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/pkg/client/clientset/versioned"
	"github.com/quotaplane/quotaplane/pkg/quotaclaim"
)

// The resource types the service registers its cost in.
const (
	CPUsType      = "compute.example.com/cpus"
	InstancesType = "compute.example.com/instances"
)

type reconciler struct {
	client.Client
	quota    versioned.Interface
	identity string
}

// Setup adds the Instance controller to mgr: claims made with quota (a
// client of the same server) as identity (the user it authenticates as).
func Setup(mgr ctrl.Manager, quota versioned.Interface, identity string) error {
	r := &reconciler{Client: mgr.GetClient(), quota: quota, identity: identity}
	return ctrl.NewControllerManagedBy(mgr).
		For(&Instance{}).
		// A claim's decision, or the machine's ConfigMap, changing brings the
		// Instance back.
		Owns(&quotav1alpha1.ResourceClaim{}).
		Owns(&corev1.ConfigMap{}).
		Complete(r)
}

func (r *reconciler) claimer(namespace string) *quotaclaim.Claimer {
	return &quotaclaim.Claimer{Client: r.quota, Namespace: namespace, Service: "compute", Identity: r.identity, OwnerReferences: true}
}

// Reconcile ensures the Instance's claim, provisions its machine once the
// claim is granted, and says where it stands.
func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	inst := &Instance{}
	if err := r.Get(ctx, req.NamespacedName, inst); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if inst.DeletionTimestamp != nil {
		return ctrl.Result{}, nil // its claim and machine go with it (ownerReferences)
	}
	owner := quotaclaim.OwnerOf(inst, GroupVersion.WithKind("Instance"))
	consumer := quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: inst.Spec.Organization}
	if inst.Spec.Project != "" {
		consumer.Kind, consumer.Name = "Project", inst.Spec.Project
	}
	requests := []quotav1alpha1.ResourceRequest{
		{ResourceType: CPUsType, Amount: inst.Spec.CPUs},
		{ResourceType: InstancesType, Amount: 1},
	}
	st, err := r.claimer(inst.Namespace).Ensure(ctx, owner, consumer, requests)
	if err != nil {
		return ctrl.Result{}, err
	}
	before := inst.DeepCopyObject().(*Instance).Status
	quotaclaim.SetCondition(&inst.Status.Conditions, inst.Generation, st)
	switch st.Phase {
	case quotaclaim.Granted:
		if err := r.provision(ctx, inst); err != nil {
			return ctrl.Result{}, err
		}
		inst.Status.Phase, inst.Status.Message = "Running", "machine "+inst.Name+"-machine provisioned"
	default:
		inst.Status.Phase, inst.Status.Message = "Pending", "waiting for quota: "+st.Message
	}
	if !equality.Semantic.DeepEqual(before, inst.Status) {
		if err := r.Status().Update(ctx, inst); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// provision makes the machine: a ConfigMap standing for it, owned by the
// Instance. Made only once the claim is granted; made again is a no-op.
func (r *reconciler) provision(ctx context.Context, inst *Instance) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: inst.Name + "-machine", Namespace: inst.Namespace},
		Data: map[string]string{"cpus": fmt.Sprint(inst.Spec.CPUs)}}
	if err := controllerutil.SetControllerReference(inst, cm, r.Scheme()); err != nil {
		return err
	}
	if err := r.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("provisioning the machine of Instance %s/%s: %w", inst.Namespace, inst.Name, err)
	}
	return nil
}
