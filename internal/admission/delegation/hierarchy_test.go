package delegation

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/admission/admissiontest"
)

const (
	systemNamespace = "quotaplane-system"
	orgNamespace    = "organization-acme"
	reserved        = quotav1alpha1.DefaultReservedLabelPrefix
	budget          = quotav1alpha1.BudgetLabel
)

var (
	platform = &user.DefaultInfo{Name: "platform-admin"}
	owner    = &user.DefaultInfo{Name: "acme-owner"}
	grantGVR = quotav1alpha1.SchemeGroupVersion.WithResource("resourcegrants")
)

// platformOnly answers as RBAC would with the platform role bound to
// platform-admin only: create ResourceGrants in the system namespace.
var platformOnly = authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.GetUser().GetName() == platform.Name && a.GetVerb() == "create" && a.GetResource() == "resourcegrants" && a.GetNamespace() == systemNamespace {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
})

// failing is an authorizer that cannot answer.
var failing = authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionNoOpinion, "", errors.New("webhook unreachable")
})

func grant(ns string, labels map[string]string, consumer quotav1alpha1.ConsumerRef, selector *metav1.LabelSelector) *unstructured.Unstructured {
	g := &quotav1alpha1.ResourceGrant{
		TypeMeta:   metav1.TypeMeta{APIVersion: quotav1alpha1.SchemeGroupVersion.String(), Kind: "ResourceGrant"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g1", Labels: labels},
		Spec:       quotav1alpha1.ResourceGrantSpec{ConsumerRef: consumer, ConsumerSelector: selector},
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(g)
	if err != nil {
		panic(err)
	}
	return &unstructured.Unstructured{Object: u}
}

func project(name, org string) *unstructured.Unstructured {
	p := &unstructured.Unstructured{}
	p.SetAPIVersion(rmv1alpha1.SchemeGroupVersion.String())
	p.SetKind("Project")
	p.SetName(name)
	p.SetLabels(map[string]string{rmv1alpha1.OrganizationNameLabel: org})
	return p
}

func namespace(name string, labels map[string]string) *unstructured.Unstructured {
	n := &unstructured.Unstructured{}
	n.SetAPIVersion("v1")
	n.SetKind("Namespace")
	n.SetName(name)
	n.SetLabels(labels)
	return n
}

func tenancyObject(kind string, labels map[string]string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{}
	o.SetAPIVersion(rmv1alpha1.SchemeGroupVersion.String())
	o.SetKind(kind)
	o.SetName("acme")
	o.SetLabels(labels)
	return o
}

var (
	acme      = quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: "acme"}
	other     = quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: "other"}
	p1        = quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: "p1"}
	foreignP  = quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: "p2"}
	missingP  = quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: "gone"}
	serviceAc = quotav1alpha1.ConsumerRef{Kind: "ServiceAccount", Namespace: "team-a", Name: "builder"}
	delegated = map[string]string{budget: "acme"}
)

func newPlugin(t *testing.T, az authorizer.Authorizer, readErr error) admission.Interface {
	reads := &admissiontest.Reads{Err: readErr, Objects: map[schema.GroupVersionResource][]*unstructured.Unstructured{
		projectsGVR:   {project("p1", "acme"), project("p2", "other")},
		namespacesGVR: {namespace("platform-labelled", map[string]string{PlatformNamespaceLabel: "true"}), namespace("team-a", nil)},
	}}
	register := func(p *admission.Plugins) {
		Register(p, Config{SystemNamespace: systemNamespace, PlatformNamespaces: []string{"milo-system"}})
	}
	return admissiontest.NewPlugin(t, register, PluginName, reads, az)
}

func TestAdmit(t *testing.T) {
	cases := map[string]struct {
		user       user.Info
		op         admission.Operation
		obj, old   *unstructured.Unstructured
		az         authorizer.Authorizer
		wantLabels map[string]string
		wantErr    bool
	}{
		"an owner's grant in its organization draws from its budget": {
			user: owner, op: admission.Create, obj: grant(orgNamespace, nil, p1, nil), wantLabels: delegated,
		},
		"an owner cannot write a grant outside the budget": {
			user: owner, op: admission.Update, obj: grant(orgNamespace, map[string]string{budget: "other"}, p1, nil),
			old: grant(orgNamespace, delegated, p1, nil), wantLabels: delegated,
		},
		"the platform's grant in an organization stays outside the budget": {
			user: platform, op: admission.Create, obj: grant(orgNamespace, nil, p1, nil),
		},
		"the platform editing a delegated grant keeps it delegated": {
			user: platform, op: admission.Update, obj: grant(orgNamespace, map[string]string{"team": "a"}, p1, nil),
			old: grant(orgNamespace, delegated, p1, nil), wantLabels: map[string]string{"team": "a", budget: "acme"},
		},
		"a grant outside an organization's namespace is left alone": {
			user: owner, op: admission.Create, obj: grant(systemNamespace, nil, p1, nil),
		},
		"the authorizer cannot answer": {
			user: owner, op: admission.Create, obj: grant(orgNamespace, nil, p1, nil), az: failing, wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			az := tc.az
			if az == nil {
				az = platformOnly
			}
			p := newPlugin(t, az, nil)
			var old runtime.Object
			if tc.old != nil {
				old = tc.old
			}
			a := admission.NewAttributesRecord(tc.obj, old, schema.GroupVersionKind{}, tc.obj.GetNamespace(), tc.obj.GetName(), grantGVR, "", tc.op, nil, false, tc.user)
			err := p.(admission.MutationInterface).Admit(context.Background(), a, nil)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Admit: %v, want an error: %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantLabels, tc.obj.GetLabels()); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
		})
	}
}

// outcome is what a client sees of a refusal: its code and the fields its
// causes name (a Forbidden error names them in its message only).
type outcome struct {
	Code   int32
	Fields []string
}

func outcomeOf(err error) outcome {
	if err == nil {
		return outcome{}
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return outcome{Code: -1}
	}
	o := outcome{Code: status.Status().Code}
	if d := status.Status().Details; d != nil {
		for _, c := range d.Causes {
			if c.Field != "" {
				o.Fields = append(o.Fields, c.Field)
			}
		}
	}
	return o
}

func TestValidateGrant(t *testing.T) {
	forbidden, internal := outcome{Code: 403}, outcome{Code: 500}
	invalid := func(fields ...string) outcome { return outcome{Code: 422, Fields: fields} }
	tenantSelector := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	reservedSelector := &metav1.LabelSelector{MatchLabels: map[string]string{reserved + "tier": "gold"}}
	cases := map[string]struct {
		user     user.Info
		op       admission.Operation
		obj, old *unstructured.Unstructured
		readErr  error
		az       authorizer.Authorizer
		want     outcome
	}{
		"the platform, in the system namespace, for anyone": {
			user: platform, op: admission.Create, obj: grant(systemNamespace, nil, serviceAc, nil),
		},
		"an owner, in the system namespace": {
			user: owner, op: admission.Create, obj: grant(systemNamespace, nil, p1, nil), want: forbidden,
		},
		"an owner, in a platform namespace given by flag": {
			user: owner, op: admission.Create, obj: grant("milo-system", nil, p1, nil), want: forbidden,
		},
		"an owner, in a namespace labelled as the platform's": {
			user: owner, op: admission.Create, obj: grant("platform-labelled", nil, p1, nil), want: forbidden,
		},
		"anyone, in a tenant's namespace": {
			user: platform, op: admission.Create, obj: grant("team-a", nil, serviceAc, nil), want: invalid("metadata.namespace"),
		},
		"the platform sets an organization's own limits": {
			user: platform, op: admission.Create, obj: grant(orgNamespace, nil, acme, nil),
		},
		"an owner may not set its organization's own limits": {
			user: owner, op: admission.Create, obj: grant(orgNamespace, delegated, acme, nil), want: forbidden,
		},
		"another organization, from this one's namespace": {
			user: platform, op: admission.Create, obj: grant(orgNamespace, nil, other, nil), want: invalid("spec.consumerRef.name"),
		},
		"an owner's delegated grant for its project": {
			user: owner, op: admission.Create, obj: grant(orgNamespace, delegated, p1, nil),
		},
		"the platform's grant for a project, outside the budget": {
			user: platform, op: admission.Create, obj: grant(orgNamespace, nil, p1, nil),
		},
		"a project of another organization": {
			user: owner, op: admission.Create, obj: grant(orgNamespace, delegated, foreignP, nil), want: invalid("spec.consumerRef.name"),
		},
		"a project that does not exist (yet)": {
			user: owner, op: admission.Create, obj: grant(orgNamespace, delegated, missingP, nil), want: outcome{Code: 429, Fields: []string{"spec.consumerRef.name"}}, // it may be created later in the same sync
		},
		"projects cannot be read": {
			user: platform, op: admission.Create, obj: grant(orgNamespace, delegated, p1, nil), readErr: errors.New("unavailable"), want: internal,
		},
		"a consumer that is not a project, from an organization's namespace": {
			user: platform, op: admission.Create, obj: grant(orgNamespace, nil, serviceAc, nil), want: invalid("spec.consumerRef.kind"),
		},
		"a budget label naming another organization": {
			user: platform, op: admission.Create, obj: grant(orgNamespace, map[string]string{budget: "other"}, p1, nil),
			want: invalid("metadata.labels[" + budget + "]"),
		},
		"an owner edits a grant the platform wrote": {
			user: owner, op: admission.Update, obj: grant(orgNamespace, delegated, p1, nil), old: grant(orgNamespace, nil, p1, nil), want: forbidden,
		},
		"an owner deletes a grant the platform wrote": {
			user: owner, op: admission.Delete, old: grant(orgNamespace, nil, p1, nil), want: forbidden,
		},
		"an owner deletes its own delegated grant": {
			user: owner, op: admission.Delete, old: grant(orgNamespace, delegated, p1, nil),
		},
		"a group grant on reserved labels, by the platform": {
			user: platform, op: admission.Create, obj: grant(systemNamespace, nil, acme, reservedSelector),
		},
		"a group grant on a label tenants set": {
			user: platform, op: admission.Create, obj: grant(systemNamespace, nil, acme, tenantSelector),
			want: invalid("spec.consumerSelector.matchLabels[team]"),
		},
		"a group grant selecting everything": {
			user: platform, op: admission.Create, obj: grant(systemNamespace, nil, acme, &metav1.LabelSelector{}),
			want: invalid("spec.consumerSelector"),
		},
		"a group grant in an organization's namespace": {
			user: platform, op: admission.Create, obj: grant(orgNamespace, nil, acme, reservedSelector), want: invalid("spec.consumerSelector"),
		},
		"the authorizer cannot answer": {
			user: platform, op: admission.Create, obj: grant(systemNamespace, nil, acme, nil), az: failing, want: internal,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			az := tc.az
			if az == nil {
				az = platformOnly
			}
			p := newPlugin(t, az, tc.readErr)
			var obj, old runtime.Object
			ns := ""
			if tc.obj != nil {
				obj, ns = tc.obj, tc.obj.GetNamespace()
			}
			if tc.old != nil {
				old, ns = tc.old, tc.old.GetNamespace()
			}
			a := admission.NewAttributesRecord(obj, old, schema.GroupVersionKind{}, ns, "g1", grantGVR, "", tc.op, nil, false, tc.user)
			err := p.(admission.ValidationInterface).Validate(context.Background(), a, nil)
			if diff := cmp.Diff(tc.want, outcomeOf(err)); diff != "" {
				t.Errorf("Validate: %v (-want +got):\n%s", err, diff)
			}
		})
	}
}

func TestValidateReservedLabels(t *testing.T) {
	orgs := rmv1alpha1.SchemeGroupVersion.WithResource("organizations")
	projects := rmv1alpha1.SchemeGroupVersion.WithResource("projects")
	cases := map[string]struct {
		user     user.Info
		resource schema.GroupVersionResource
		op       admission.Operation
		now, was map[string]string
		want     outcome
	}{
		"a tenant sets a reserved label on a project": {
			user: owner, resource: projects, op: admission.Create, now: map[string]string{reserved + "tier": "gold"},
			want: outcome{Code: 403, Fields: []string{"metadata.labels[" + reserved + "tier]"}},
		},
		"a tenant changes one and removes another on an organization": {
			user: owner, resource: orgs, op: admission.Update,
			now:  map[string]string{reserved + "tier": "silver"},
			was:  map[string]string{reserved + "tier": "gold", reserved + "region": "eu"},
			want: outcome{Code: 403, Fields: []string{"metadata.labels[" + reserved + "region]", "metadata.labels[" + reserved + "tier]"}},
		},
		"a tenant changes its own labels and keeps the reserved ones": {
			user: owner, resource: orgs, op: admission.Update,
			now: map[string]string{reserved + "tier": "gold", "team": "b"},
			was: map[string]string{reserved + "tier": "gold", "team": "a"},
		},
		"the platform sets a reserved label": {
			user: platform, resource: projects, op: admission.Update, now: map[string]string{reserved + "tier": "gold"}, was: map[string]string{},
		},
		"a reserved label set to the empty string": {
			user: owner, resource: projects, op: admission.Update, now: map[string]string{reserved + "tier": ""}, was: map[string]string{},
			want: outcome{Code: 403, Fields: []string{"metadata.labels[" + reserved + "tier]"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := newPlugin(t, platformOnly, nil)
			var old runtime.Object
			if tc.was != nil {
				old = tenancyObject("Organization", tc.was)
			}
			a := admission.NewAttributesRecord(tenancyObject("Organization", tc.now), old, schema.GroupVersionKind{}, "", "acme", tc.resource, "", tc.op, nil, false, tc.user)
			err := p.(admission.ValidationInterface).Validate(context.Background(), a, nil)
			got := outcomeOf(err)
			for _, k := range []string{"region", "tier"} {
				if f := "metadata.labels[" + reserved + k + "]"; err != nil && strings.Contains(err.Error(), f) {
					got.Fields = append(got.Fields, f)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Validate: %v (-want +got):\n%s", err, diff)
			}
		})
	}
}
