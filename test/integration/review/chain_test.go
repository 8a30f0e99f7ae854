package review

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// chainWorld adds to a world what the real admission chain changes before
// quota is decided: a Machine CRD whose spec.diskGiB defaults to 20, Pods
// (whose requests Kubernetes copies from their limits), and a
// MutatingAdmissionPolicy that sets data.cpu of ConfigMaps labelled boost.
// Pods and Machines charge millicores to the project their label (Pods)
// or spec.project (Machines) names, a Machine 10m per GiB of disk.
type chainWorld struct {
	*world
	dyn      dynamic.Interface
	millis   string
	machines schema.GroupVersionResource
}

func newChainWorld(t *testing.T) *chainWorld {
	t.Helper()
	w := &chainWorld{world: newWorld(t, "web", "api"), dyn: dynamic.NewForConfigOrDie(srv.Config)}
	ctx := context.Background()
	group := w.org + ".example.com"
	w.millis = group + "/millicores"
	w.machines = schema.GroupVersionResource{Group: group, Version: "v1", Resource: "machines"}
	ax := apiextensionsclient.NewForConfigOrDie(srv.Config)
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "machines." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "machines", Singular: "machine", Kind: "Machine", ListKind: "MachineList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", Required: []string{"project"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"project": {Type: "string"},
						"diskGiB": {Type: "integer", Default: &apiextensionsv1.JSON{Raw: []byte("20")}},
					}}}}}}}}}
	if _, err := ax.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.poll("the Machine CRD to be served", func() bool {
		_, err := w.dyn.Resource(w.machines).Namespace(w.ns).List(ctx, metav1.ListOptions{})
		return err == nil
	})
	w.create(&quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: w.org + "-millicores"}, Spec: quotav1alpha1.ResourceRegistrationSpec{
		ConsumerType:        quotav1alpha1.ConsumerTypeRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project"},
		ParentConsumerTypes: []quotav1alpha1.ConsumerTypeRef{{APIGroup: rmv1alpha1.GroupName, Kind: "Organization"}},
		Type:                quotav1alpha1.RegistrationTypeAllocation, ResourceType: quotav1alpha1.ResourceType(w.millis), BaseUnit: "millicore",
		ClaimingResources: []quotav1alpha1.ClaimingResource{{Kind: "Pod"}, {APIGroup: group, Kind: "Machine"}}}})
	policy := func(name, apiVersion, kind, consumer, amount string) *quotav1alpha1.ClaimCreationPolicy {
		p := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: w.org + "-" + name}}
		p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: apiVersion, Kind: kind}
		p.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: fmt.Sprintf("trigger.metadata.namespace == %q", w.ns)}}
		p.Spec.Target.ResourceClaimTemplate.Spec = quotav1alpha1.ResourceClaimTemplateSpec{
			ConsumerRef: quotav1alpha1.TemplateConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: consumer},
			Requests:    []quotav1alpha1.ClaimTemplateRequest{{ResourceType: w.millis, Amount: intstr.FromString(amount)}},
		}
		return p
	}
	w.create(policy("pods", "v1", "Pod", "{{ trigger.metadata.labels.project }}",
		"{{ string(trigger.spec.containers.map(c, has(c.resources) && has(c.resources.requests) && 'cpu' in c.resources.requests ? int(quantity(c.resources.requests['cpu']).asApproximateFloat() * 1000.0 + 0.5) : 0).sum()) }}"))
	w.create(policy("machines", group+"/v1", "Machine", "{{ trigger.spec.project }}", "{{ string(trigger.spec.diskGiB * 10) }}"))
	mapClient := w.kube.AdmissionregistrationV1()
	if _, err := mapClient.MutatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: w.org + "-boost"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "boosted",
				Expression: fmt.Sprintf("object.metadata.namespace == %q && has(object.metadata.labels) && 'boost' in object.metadata.labels", w.ns)}},
			FailurePolicy:      ptr.To(admissionregistrationv1.Fail),
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
				JSONPatch: &admissionregistrationv1.JSONPatch{Expression: `[JSONPatch{op: "add", path: "/data/cpu", value: "3"}]`}}},
		}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the MutatingAdmissionPolicy: %v", err)
	}
	if _, err := mapClient.MutatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: w.org + "-boost"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: w.org + "-boost"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the MutatingAdmissionPolicyBinding: %v", err)
	}
	// In force: a boosted ConfigMap's dry run comes back with cpu 3, a
	// Machine's and a Pod's with their charges.
	last := ""
	defer func() {
		if t.Failed() {
			t.Logf("the last boosted dry run: %s", last)
		}
	}()
	w.poll("the MutatingAdmissionPolicy to be in force", func() bool {
		cm := w.configMap("probe", w.projects[0], 1)
		cm.Labels = map[string]string{"boost": "true"}
		u := toUnstructured(t, cm)
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
		got, err := w.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(w.ns).Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			last = err.Error()
			return strings.Contains(last, "requested 3 cores") // charged as the policy leaves it (no grant yet)
		}
		last = fmt.Sprint(got.Object["data"])
		return got.Object["data"].(map[string]any)["cpu"] == "3"
	})
	for _, probe := range []*unstructured.Unstructured{toUnstructured(t, w.configMap("probe", w.projects[0], 1)), w.machine("probe", w.projects[0], 0), w.pod("probe", w.projects[0], "", "100m")} {
		gvr := w.gvr(probe)
		w.poll("the policy of "+probe.GetKind()+" to be in force", func() bool {
			_, err := w.dyn.Resource(gvr).Namespace(w.ns).Create(ctx, probe.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err != nil && strings.Contains(err.Error(), "so its limit is 0") // no millicores granted yet: the policy charges it
		})
	}
	return w
}

func toUnstructured(t *testing.T, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	return u
}

// machine is a Machine of project; diskGiB 0 leaves spec.diskGiB out (the
// CRD defaults it to 20).
func (w *chainWorld) machine(name, project string, diskGiB int64) *unstructured.Unstructured {
	spec := map[string]any{"project": project}
	if diskGiB > 0 {
		spec["diskGiB"] = diskGiB
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": w.machines.GroupVersion().String(), "kind": "Machine",
		"metadata": map[string]any{"name": name, "namespace": w.ns}, "spec": spec}}
}

// pod is a Pod of project with one container: requests cpu (may be "")
// and limits cpu (may be "").
func (w *chainWorld) pod(name, project, requests, limits string) *unstructured.Unstructured {
	res := map[string]any{}
	if requests != "" {
		res["requests"] = map[string]any{"cpu": requests}
	}
	if limits != "" {
		res["limits"] = map[string]any{"cpu": limits}
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": w.ns, "labels": map[string]any{"project": project}},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "app", "image": "example.com/app:1", "resources": res}}}}}
}

func (w *chainWorld) gvr(u *unstructured.Unstructured) schema.GroupVersionResource {
	switch u.GetKind() {
	case "Pod":
		return schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	case "ConfigMap":
		return schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	}
	return w.machines
}

// applyOne creates u, or updates it over the object that exists, as
// kubectl apply would one at a time.
func (w *chainWorld) applyOne(u *unstructured.Unstructured) (existed bool, err error) {
	ctx := context.Background()
	c := w.dyn.Resource(w.gvr(u)).Namespace(u.GetNamespace())
	cur, err := c.Get(ctx, u.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = c.Create(ctx, u.DeepCopy(), metav1.CreateOptions{})
		return false, err
	}
	if err != nil {
		return true, err
	}
	next := cur.DeepCopy()
	for _, k := range []string{"spec", "data"} {
		if v, ok := u.Object[k]; ok {
			next.Object[k] = v
		}
	}
	_, err = c.Update(ctx, next, metav1.UpdateOptions{})
	return true, err
}

// TestAReviewGoesThroughTheRealChain: 40 manifests a new user writes —
// Machines without spec.diskGiB (their CRD defaults it), Pods with only
// limits (Kubernetes copies them into requests), ConfigMaps a
// MutatingAdmissionPolicy changes, and updates of a ConfigMap and a Machine
// that exist — reviewed, then applied one by one. Each answer of the review
// is the answer of applying: what fits is admitted, what is refused is
// refused with the same message, and every level ends where the review
// said. (Reviewed as written, the defaulted Machines were refused "no such
// key: diskGiB" and the Pods "amount 0 must be positive", all of which
// applying admits.)
func TestAReviewGoesThroughTheRealChain(t *testing.T) {
	w := newChainWorld(t)
	web, api := w.projects[0], w.projects[1]
	w.grant("org", w.consumer("Organization", w.org), 40)
	w.grant("web", w.consumer("Project", web), 24)
	w.grant("api", w.consumer("Project", api), 20)
	for _, g := range []struct {
		name     string
		consumer quotav1alpha1.ConsumerRef
		amount   int64
	}{{"org-millis", w.consumer("Organization", w.org), 2400}, {"web-millis", w.consumer("Project", web), 1500}, {"api-millis", w.consumer("Project", api), 1500}} {
		rg := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: g.name, Namespace: w.orgNS}, Spec: quotav1alpha1.ResourceGrantSpec{
			ConsumerRef: g.consumer, Allowances: []quotav1alpha1.Allowance{{ResourceType: quotav1alpha1.ResourceType(w.millis), Buckets: []quotav1alpha1.GrantBucket{{Amount: g.amount}}}}}}
		w.create(rg)
		// Counted by the engine before anything is reviewed or applied.
		w.poll("grant "+g.name+" to be active", func() bool {
			got := &quotav1alpha1.ResourceGrant{}
			return w.admin.Get(context.Background(), client.ObjectKeyFromObject(rg), got) == nil &&
				meta.IsStatusConditionTrue(got.Status.Conditions, quotav1alpha1.GrantConditionActive) && got.Status.ObservedGeneration == got.Generation
		})
	}
	ctx := context.Background()
	// What exists before: a ConfigMap and a Machine the manifests change.
	w.create(w.configMap("grow", web, 2))
	if _, err := w.dyn.Resource(w.machines).Namespace(w.ns).Create(ctx, w.machine("resize", api, 10), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bucket := func(kind, name, rt string) quota.BucketID {
		return quota.BucketID{Consumer: quota.ConsumerID{APIGroup: rmv1alpha1.GroupName, Kind: kind, Name: name}, ResourceType: rt}
	}
	w.allocatedOf(bucket("Project", api, w.millis), 100)
	w.allocatedOf(bucket("Project", web, w.rt), 2)

	var manifests []*unstructured.Unstructured
	project := func(i int) string {
		if i%3 == 2 {
			return api
		}
		return web
	}
	for i := range 40 {
		var u *unstructured.Unstructured
		switch p := project(i); {
		case i == 5:
			cm := w.configMap("grow", web, 4)
			u = toUnstructured(t, cm)
		case i == 17:
			u = w.machine("resize", api, 30) // 100m → 300m
		case i%4 == 0:
			u = w.machine(fmt.Sprintf("vm-%02d", i), p, 0) // diskGiB defaulted: 200m
		case i%4 == 1:
			u = w.pod(fmt.Sprintf("pod-%02d", i), p, "", fmt.Sprintf("%dm", 100+50*(i%3))) // requests from limits
		case i%4 == 2 && i%8 == 2:
			cm := w.configMap(fmt.Sprintf("cm-%02d", i), p, 1)
			cm.Labels = map[string]string{"boost": "true"} // the policy makes it cpu 3
			u = toUnstructured(t, cm)
		case i%4 == 2:
			u = toUnstructured(t, w.configMap(fmt.Sprintf("cm-%02d", i), p, 1+i%2))
		default:
			u = w.pod(fmt.Sprintf("pod-%02d", i), p, "150m", "300m")
		}
		manifests = append(manifests, u)
	}
	objs := make([]runtime.RawExtension, len(manifests))
	for i, m := range manifests {
		raw, err := m.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		objs[i] = runtime.RawExtension{Raw: raw}
	}
	start := time.Now()
	got, err := w.quota.QuotaV1alpha1().QuotaReviews().Create(ctx, &quotav1alpha1.QuotaReview{Spec: quotav1alpha1.QuotaReviewSpec{Objects: objs}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("reviewing: %v", err)
	}
	t.Logf("review of 40 objects through the chain: %s; %s", time.Since(start).Round(time.Millisecond), got.Status.Message)
	st := got.Status
	counts := map[quotav1alpha1.QuotaReviewResult]int{}
	for i, o := range st.Objects {
		counts[o.Result]++
		if strings.Contains(o.Message, "no such key") || strings.Contains(o.Message, "must be positive") {
			t.Errorf("objects[%d] %s %s answered as written, not as applied: %s", i, o.Kind, o.Name, o.Message)
		}
	}
	if counts[quotav1alpha1.ReviewFits] < 10 || counts[quotav1alpha1.ReviewRefused] == 0 {
		t.Fatalf("the set should have objects that fit and some refused: %v", counts)
	}
	if o := st.Objects[2]; o.Result == quotav1alpha1.ReviewFits && (len(o.Charges) != 1 || o.Charges[0].Amount != 3) {
		t.Errorf("the boosted ConfigMap is charged as the MutatingAdmissionPolicy leaves it (3): %+v", o.Charges)
	}

	for i, m := range manifests {
		existed, err := w.applyOne(m)
		o := st.Objects[i]
		switch o.Result {
		case quotav1alpha1.ReviewFits, quotav1alpha1.ReviewNotCharged:
			if err != nil {
				t.Fatalf("objects[%d] %s %s: the review said %s, applying it: %v", i, m.GetKind(), m.GetName(), o.Result, err)
			}
		case quotav1alpha1.ReviewRefused:
			if err == nil {
				t.Fatalf("objects[%d] %s %s: the review refused it (%s), applying it was admitted", i, m.GetKind(), m.GetName(), o.Message)
			}
			if err.Error() != o.Message {
				t.Fatalf("objects[%d] %s %s: refused with\n  %s\nthe review said\n  %s", i, m.GetKind(), m.GetName(), err, o.Message)
			}
		}
		if existed && err == nil {
			w.claimHolds(m.GetName(), o.Charges[0].Amount)
		}
	}
	if len(st.Buckets) < 6 {
		t.Fatalf("buckets %+v: want both resource types of the organization and its two projects", st.Buckets)
	}
	for _, b := range st.Buckets {
		w.allocatedOf(bucket(b.ConsumerRef.Kind, b.ConsumerRef.Name, string(b.ResourceType)), b.AllocatedAfter)
	}
}

// allocatedOf waits until a bucket shows want allocated.
func (w *chainWorld) allocatedOf(id quota.BucketID, want int64) {
	w.t.Helper()
	b := &quotav1alpha1.AllowanceBucket{}
	w.poll(fmt.Sprintf("%s of %s to show %d allocated", id.ResourceType, id.Consumer.LevelName(), want), func() bool {
		err := w.admin.Get(context.Background(), clientKey(w.orgNS, quota.BucketName(id)), b)
		return err == nil && b.Status.Allocated == want
	})
}

// claimHolds waits until an updated object's one claim holds amount: the
// update is settled, as on a quiet server before the next apply.
func (w *chainWorld) claimHolds(name string, amount int64) {
	w.t.Helper()
	w.poll(fmt.Sprintf("the claim of %s to hold %d", name, amount), func() bool {
		l := &quotav1alpha1.ResourceClaimList{}
		if err := w.admin.List(context.Background(), l); err != nil {
			return false
		}
		n, ok := 0, false
		for _, c := range l.Items {
			if c.Spec.ResourceRef != nil && c.Spec.ResourceRef.Namespace == w.ns && c.Spec.ResourceRef.Name == name {
				n++
				ok = c.Spec.Requests[0].Amount == amount
			}
		}
		return n == 1 && ok
	})
}

func clientKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

// TestAWebhookThatCannotAnswerIsNotGuessed: a mutating webhook that would
// see an object and cannot be called (here: nothing listens at its URL,
// failurePolicy Fail) makes that object's answer the error applying it gets
// — never an answer computed from the object as written — while the other
// objects of the review are answered as usual.
func TestAWebhookThatCannotAnswerIsNotGuessed(t *testing.T) {
	w := newWorld(t, "web")
	w.grant("org", w.consumer("Organization", w.org), 10)
	w.grant("web", w.consumer("Project", w.projects[0]), 10)
	w.ready()
	ctx := context.Background()
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	url := "https://127.0.0.1:1/mutate"
	hook := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: w.org + "-unreachable"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "unreachable.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"hooked": w.org}},
			FailurePolicy:  &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](2)}}}
	if _, err := w.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, hook, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = w.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), hook.Name, metav1.DeleteOptions{})
	})
	hooked := w.configMap("hooked", w.projects[0], 1)
	hooked.Labels = map[string]string{"hooked": w.org}
	// The server sees the webhook once applying hooked fails on it. The
	// probe is a dry run: a real create made before the server saw the
	// webhook would store hooked, and the review would then answer an
	// update of it, which the webhook (creates only) never sees.
	var applyErr error
	w.poll("the webhook to be called", func() bool {
		applyErr = w.admin.Create(ctx, hooked.DeepCopy(), client.DryRunAll)
		return applyErr != nil && strings.Contains(applyErr.Error(), "unreachable.example.com")
	})
	if err := w.admin.Get(ctx, client.ObjectKeyFromObject(hooked), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the probes stored the ConfigMap the review answers as a create: %v", err)
	}
	plain := w.configMap("plain", w.projects[0], 2)
	got, err := w.quota.QuotaV1alpha1().QuotaReviews().Create(ctx, reviewOf(t, hooked, plain), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o := got.Status.Objects[0]
	if o.Result != quotav1alpha1.ReviewRefused || !strings.Contains(o.Message, "unreachable.example.com") || len(o.Charges) != 0 {
		t.Errorf("the object the webhook would see: %s %s %q %+v; want refused with the webhook's error, as applying (%v)", o.Result, o.Reason, o.Message, o.Charges, applyErr)
	}
	if o := got.Status.Objects[1]; o.Result != quotav1alpha1.ReviewFits || len(o.Charges) != 1 || o.Charges[0].Amount != 2 {
		t.Errorf("the object no webhook sees: %+v", o)
	}
}
