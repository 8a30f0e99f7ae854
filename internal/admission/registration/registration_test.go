package registration

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/admission/admissiontest"
)

func registrationObject(name, resourceType string, baseUnit any) *unstructured.Unstructured {
	spec := map[string]any{}
	if resourceType != "" {
		spec["resourceType"] = resourceType
	}
	if baseUnit != nil {
		spec["baseUnitQuantity"] = baseUnit
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": quotav1alpha1.SchemeGroupVersion.String(), "kind": "ResourceRegistration",
		"metadata": map[string]any{"name": name}, "spec": spec,
	}}
}

func TestValidate(t *testing.T) {
	existing := registrationObject("cpu", "compute.example.com/cpu", "1")
	cases := map[string]struct {
		obj         runtime.Object
		resource    schema.GroupVersionResource
		subresource string
		op          admission.Operation
		listErr     error
		wantErr     string
	}{
		"a new resource type": {
			obj:      registrationObject("memory", "compute.example.com/memory", "1Mi"),
			resource: registrations, op: admission.Create,
		},
		"a second registration of a resource type": {
			obj:      registrationObject("cpu-again", "compute.example.com/cpu", nil),
			resource: registrations, op: admission.Create,
			wantErr: `ResourceRegistration.quota.miloapis.com "cpu-again" is invalid: spec.resourceType: Invalid value: "compute.example.com/cpu": ` +
				`already registered by ResourceRegistration "cpu"; a resource type is registered once: change that registration, or delete it first`,
		},
		"an update of the registration that holds the type": {
			obj:      registrationObject("cpu", "compute.example.com/cpu", "2"),
			resource: registrations, op: admission.Update,
		},
		"a base unit that is not a quantity": {
			obj:      registrationObject("memory", "compute.example.com/memory", "one mebibyte"),
			resource: registrations, op: admission.Create,
			wantErr: `ResourceRegistration.quota.miloapis.com "memory" is invalid: spec.baseUnitQuantity: Invalid value: "one mebibyte": ` +
				`"one mebibyte" is not a Kubernetes quantity; write what one base unit is, for example 1Mi for a base unit of MiB or 1 for cores`,
		},
		"a base unit of zero": {
			obj:      registrationObject("memory", "compute.example.com/memory", "0"),
			resource: registrations, op: admission.Create,
			wantErr: `ResourceRegistration.quota.miloapis.com "memory" is invalid: spec.baseUnitQuantity: Invalid value: "0": ` +
				`one base unit must be a positive quantity, not 0; write for example 1Mi for a base unit of MiB`,
		},
		"a negative base unit, written as a number": {
			obj:      registrationObject("memory", "compute.example.com/memory", int64(-1)),
			resource: registrations, op: admission.Create,
			wantErr: `ResourceRegistration.quota.miloapis.com "memory" is invalid: spec.baseUnitQuantity: Invalid value: -1: ` +
				`one base unit must be a positive quantity, not -1; write for example 1Mi for a base unit of MiB`,
		},
		"no resource type: left to the schema": {
			obj:      registrationObject("empty", "", nil),
			resource: registrations, op: admission.Create,
		},
		"registrations cannot be listed": {
			obj:      registrationObject("memory", "compute.example.com/memory", nil),
			resource: registrations, op: admission.Create,
			listErr: errors.New("etcd unavailable"),
			wantErr: "Internal error occurred: checking whether compute.example.com/memory is already registered: etcd unavailable",
		},
		"the status subresource": {
			obj:      registrationObject("cpu-again", "compute.example.com/cpu", "0"),
			resource: registrations, subresource: "status", op: admission.Update,
		},
		"another resource": {
			obj:      registrationObject("cpu-again", "compute.example.com/cpu", "0"),
			resource: quotav1alpha1.SchemeGroupVersion.WithResource("resourcegrants"), op: admission.Create,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reads := &admissiontest.Reads{Objects: map[schema.GroupVersionResource][]*unstructured.Unstructured{registrations: {existing}}, Err: tc.listErr}
			p := admissiontest.NewPlugin(t, Register, PluginName, reads, nil)
			a := admission.NewAttributesRecord(tc.obj, nil, quotav1alpha1.SchemeGroupVersion.WithKind("ResourceRegistration"), "",
				tc.obj.(*unstructured.Unstructured).GetName(), tc.resource, tc.subresource, tc.op, nil, false, &user.DefaultInfo{Name: "alice"})
			if !p.Handles(tc.op) {
				t.Fatalf("the plugin does not handle %s", tc.op)
			}
			gotErr := ""
			if err := p.(admission.ValidationInterface).Validate(context.Background(), a, nil); err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHandles(t *testing.T) {
	p := admissiontest.NewPlugin(t, Register, PluginName, &admissiontest.Reads{}, nil)
	got := map[admission.Operation]bool{}
	for _, op := range []admission.Operation{admission.Create, admission.Update, admission.Delete, admission.Connect} {
		got[op] = p.Handles(op)
	}
	want := map[admission.Operation]bool{admission.Create: true, admission.Update: true, admission.Delete: false, admission.Connect: false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Handles (-want +got):\n%s", diff)
	}
}
