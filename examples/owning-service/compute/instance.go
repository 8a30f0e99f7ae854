package compute

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// GroupVersion of the Instance kind.
var GroupVersion = schema.GroupVersion{Group: "compute.example.com", Version: "v1alpha1"}

// Instance is a virtual machine of the example service.
type Instance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              InstanceSpec   `json:"spec"`
	Status            InstanceStatus `json:"status,omitempty"`
}

// InstanceSpec is what a user asks for.
type InstanceSpec struct {
	// Organization is charged for the instance, or, with Project, the
	// project's organization (its cap over all its projects).
	Organization string `json:"organization"`
	// Project, when set, is charged for the instance.
	Project string `json:"project,omitempty"`
	// CPUs of the instance.
	CPUs int64 `json:"cpus"`
}

// InstanceStatus is what the service did.
type InstanceStatus struct {
	// Phase is Pending (waiting for quota) or Running.
	Phase      string             `json:"phase,omitempty"`
	Message    string             `json:"message,omitempty"`
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// InstanceList is a list of Instances.
type InstanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Instance `json:"items"`
}

func (in *Instance) DeepCopyObject() runtime.Object {
	out := *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Status.Conditions = make([]metav1.Condition, len(in.Status.Conditions))
	for i := range in.Status.Conditions {
		in.Status.Conditions[i].DeepCopyInto(&out.Status.Conditions[i])
	}
	return &out
}

func (in *InstanceList) DeepCopyObject() runtime.Object {
	out := *in
	out.Items = make([]Instance, len(in.Items))
	for i := range in.Items {
		out.Items[i] = *in.Items[i].DeepCopyObject().(*Instance)
	}
	return &out
}

// NewScheme is a scheme with the built-in kinds, the quota kinds and
// Instances.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = quotav1alpha1.AddToScheme(s)
	s.AddKnownTypes(GroupVersion, &Instance{}, &InstanceList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return s
}

// InstallCRD creates the Instance CRD, or updates it, and waits until it is
// served.
func InstallCRD(ctx context.Context, c apiextensionsclient.Interface) error {
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "instances." + GroupVersion.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: GroupVersion.Group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "instances", Singular: "instance", Kind: "Instance", ListKind: "InstanceList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: GroupVersion.Version, Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{
					{Name: "Organization", Type: "string", JSONPath: ".spec.organization"},
					{Name: "Project", Type: "string", JSONPath: ".spec.project"},
					{Name: "CPUs", Type: "integer", JSONPath: ".spec.cpus"},
					{Name: "Phase", Type: "string", JSONPath: ".status.phase"},
					{Name: "Message", Type: "string", JSONPath: ".status.message", Priority: 1},
				},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Required: []string{"organization", "cpus"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"organization": {Type: "string", MinLength: ptr.To[int64](1)},
							"project":      {Type: "string"},
							"cpus":         {Type: "integer", Minimum: ptr.To[float64](1)},
						}},
						"status": {Type: "object", XPreserveUnknownFields: ptr.To(true)},
					},
				}},
			}},
		},
	}
	crds := c.ApiextensionsV1().CustomResourceDefinitions()
	old, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = crds.Create(ctx, crd, metav1.CreateOptions{})
	case err == nil:
		crd.ResourceVersion = old.ResourceVersion
		_, err = crds.Update(ctx, crd, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("installing the Instance CRD: %w", err)
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}
