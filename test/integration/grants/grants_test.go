package grants

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/policy"
	"github.com/quotaplane/quotaplane/test/quotatest"
	"github.com/quotaplane/quotaplane/test/timed"
)

// TestPolicyGrantIsActiveWithItsLimit: a ConfigMap matching a Ready policy
// gets a grant, labelled with the policy and the trigger, that the quota
// engine makes Active and whose amount shows as the bucket's limit; an
// event on the ConfigMap says so. It measures trigger create → Active grant.
func TestPolicyGrantIsActiveWithItsLimit(t *testing.T) {
	w := newWorld(t, "projects")
	p := w.tierPolicy("gold", "gold", "projects", 10)
	ready := w.waitReady(p, metav1.ConditionTrue, policy.ReasonReady)
	if ready.Message != "Policy is ready and active" {
		t.Errorf("Ready message %q is not the reference implementation's", ready.Message)
	}
	w.waitCondition(p, quotav1alpha1.GrantPolicyConditionGrantsSynced, metav1.ConditionTrue, quotav1alpha1.GrantPolicyReasonGrantsSynced)
	if !slices.Contains(p.Finalizers, quotav1alpha1.GrantPolicyFinalizer) {
		t.Errorf("policy finalizers %v lack %s", p.Finalizers, quotav1alpha1.GrantPolicyFinalizer)
	}

	began := time.Now()
	cm := w.configMap("acme", "tier", "gold")
	grants := w.waitGrants(p.Name, w.NS+"/acme-gold")
	made := time.Since(began)
	g := &grants[0]
	w.WaitCondition(g, quotav1alpha1.GrantConditionActive, metav1.ConditionTrue)
	active := time.Since(began)
	w.WaitBucket(quotatest.N(10, 0, 10), "projects")
	t.Logf("measured: ConfigMap created → grant exists %s, → grant Active %s, → bucket limit %s", made, active, time.Since(began))

	want := map[string]string{
		quotav1alpha1.GrantPolicyLabel: p.Name, quotav1alpha1.GrantPolicyLabelTriggerKind: "ConfigMap",
		quotav1alpha1.GrantPolicyLabelTriggerName: "acme", quotav1alpha1.GrantPolicyLabelTriggerNamespace: w.NS, "tier": "gold",
	}
	for k, v := range want {
		if g.Labels[k] != v {
			t.Errorf("grant label %s = %q, want %q (labels %v)", k, g.Labels[k], v, g.Labels)
		}
	}
	if g.Annotations[quotav1alpha1.GrantPolicyAnnotationTriggerUID] != string(cm.UID) {
		t.Errorf("grant annotation %s = %q, want the ConfigMap's UID %s", quotav1alpha1.GrantPolicyAnnotationTriggerUID, g.Annotations[quotav1alpha1.GrantPolicyAnnotationTriggerUID], cm.UID)
	}
	if g.Spec.ConsumerRef.Name != w.Org.Name || len(g.Spec.Allowances) != 1 || g.Spec.Allowances[0].Buckets[0].Amount != 10 {
		t.Errorf("grant spec %+v is not the rendered template", g.Spec)
	}
	w.waitEvent(w.NS, "acme", "GrantCreated", "acme-gold")
}

// TestGrantsFollowTheTrigger: when a ConfigMap's tier changes so that
// another policy applies, its grant moves to that policy; editing the
// template updates the grant in place; deleting the ConfigMap deletes it.
func TestGrantsFollowTheTrigger(t *testing.T) {
	w := newWorld(t, "projects")
	gold := w.tierPolicy("gold", "gold", "projects", 10)
	silver := w.tierPolicy("silver", "silver", "projects", 3)
	w.waitReady(gold, metav1.ConditionTrue, policy.ReasonReady)
	w.waitReady(silver, metav1.ConditionTrue, policy.ReasonReady)

	cm := w.configMap("acme", "tier", "gold")
	w.waitGrants(gold.Name, w.NS+"/acme-gold")
	w.WaitBucket(quotatest.N(10, 0, 10), "projects")

	w.update(cm, func() { cm.Labels["tier"] = "silver" })
	w.waitGrants(gold.Name)
	grants := w.waitGrants(silver.Name, w.NS+"/acme-silver")
	if grants[0].Labels["tier"] != "silver" {
		t.Errorf("silver grant labels %v, want tier=silver", grants[0].Labels)
	}
	w.WaitBucket(quotatest.N(3, 0, 3), "projects")
	w.waitEvent(w.NS, "acme", "GrantDeleted", "acme-gold")

	// The template is edited: the grant is updated, not replaced.
	uid := grants[0].UID
	w.update(silver, func() { silver.Spec.Target.ResourceGrantTemplate.Spec.Allowances[0].Buckets[0].Amount = 5 })
	w.waitReady(silver, metav1.ConditionTrue, policy.ReasonReady)
	w.WaitBucket(quotatest.N(5, 0, 5), "projects")
	grants = w.waitGrants(silver.Name, w.NS+"/acme-silver")
	if grants[0].UID != uid {
		t.Errorf("the grant was replaced (uid %s → %s), want it updated", uid, grants[0].UID)
	}
	w.waitEvent(w.NS, "acme", "GrantUpdated", "acme-silver")

	// The template's name is edited: the old grant goes, the new one comes.
	w.update(silver, func() { silver.Spec.Target.ResourceGrantTemplate.Metadata.Name = "{{ trigger.metadata.name }}-renamed" })
	w.waitGrants(silver.Name, w.NS+"/acme-renamed")
	w.WaitBucket(quotatest.N(5, 0, 5), "projects")

	if err := w.C.Delete(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	w.waitGrants(silver.Name)
	w.waitGrants(gold.Name)
}

// TestPolicyDeletedTakesItsGrants: deleting a policy deletes every grant it
// made (its finalizer holds it until then), and only those.
func TestPolicyDeletedTakesItsGrants(t *testing.T) {
	w := newWorld(t, "projects")
	p := w.tierPolicy("gold", "gold", "projects", 2)
	other := w.tierPolicy("other", "gold", "projects", 1)
	w.waitReady(p, metav1.ConditionTrue, policy.ReasonReady)
	for _, n := range []string{"a", "b", "c"} {
		w.configMap(n, "tier", "gold")
	}
	w.waitGrants(p.Name, w.NS+"/a-gold", w.NS+"/b-gold", w.NS+"/c-gold")
	w.waitGrants(other.Name, w.NS+"/a-other", w.NS+"/b-other", w.NS+"/c-other")
	w.WaitBucket(quotatest.N(9, 0, 9), "projects")

	if err := w.C.Delete(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	w.waitGrants(p.Name)
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(w.C.Get(ctx, client.ObjectKeyFromObject(p), &quotav1alpha1.GrantCreationPolicy{})), nil
	})
	if err != nil {
		t.Fatal("the deleted policy is still held by its finalizer")
	}
	w.WaitBucket(quotatest.N(3, 0, 3), "projects")
	w.waitGrants(other.Name, w.NS+"/a-other", w.NS+"/b-other", w.NS+"/c-other")
}

// TestDisabledPolicyKeepsItsGrants: a disabled policy keeps the grants it
// made for objects that exist, and makes none; a grant owned by its trigger
// (the reference implementation's ownerReference) goes with it when the
// trigger is deleted meanwhile; enabled again, it converges.
func TestDisabledPolicyKeepsItsGrants(t *testing.T) {
	w := newWorld(t, "projects")
	p := w.tierPolicy("gold", "gold", "projects", 4)
	w.waitReady(p, metav1.ConditionTrue, policy.ReasonReady)
	first := w.configMap("first", "tier", "gold")
	w.waitGrants(p.Name, w.NS+"/first-gold")

	w.update(p, func() { p.Spec.Disabled = true })
	c := w.waitReady(p, metav1.ConditionFalse, policy.ReasonDisabled)
	if !strings.Contains(c.Message, "kept") {
		t.Errorf("disabled message %q does not say the grants are kept", c.Message)
	}
	w.configMap("second", "tier", "gold")
	if err := w.C.Delete(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	w.waitGrants(p.Name)

	w.update(p, func() { p.Spec.Disabled = false })
	w.waitReady(p, metav1.ConditionTrue, policy.ReasonReady)
	w.waitGrants(p.Name, w.NS+"/second-gold")
}

// TestInvalidPolicyCreatesNothing: a policy that does not compile or reads
// the request is refused at create, naming the field; one that can only be
// judged against the cluster (its cost on the trigger kind's schema, its
// consumer against the registration, an unregistered resource type) is
// Ready=False with ValidationFailed and a message naming the field; it
// makes no grant.
func TestInvalidPolicyCreatesNothing(t *testing.T) {
	w := newWorld(t, "projects")
	cases := []struct {
		name   string
		mutate func(*quotav1alpha1.GrantCreationPolicy)
		field  string
		cause  string
	}{
		{"syntax", func(p *quotav1alpha1.GrantCreationPolicy) {
			p.Spec.Trigger.Constraints[0].Expression = "trigger.metadata.name +"
		}, "spec.trigger.constraints[0].expression", ""},
		{"template", func(p *quotav1alpha1.GrantCreationPolicy) {
			p.Spec.Target.ResourceGrantTemplate.Metadata.Name = "{{ trigger.metadata.name"
		}, "spec.target.resourceGrantTemplate.metadata.name", ""},
		{"user", func(p *quotav1alpha1.GrantCreationPolicy) {
			p.Spec.Trigger.Constraints[0].Expression = "user.name == 'admin'"
		}, "spec.trigger.constraints[0].expression", "user"},
		{"cost", func(p *quotav1alpha1.GrantCreationPolicy) {
			// Typed from ConfigMap's schema, five nested loops over an
			// unbounded map are estimated far over the limit.
			p.Spec.Trigger.Constraints[0].Expression = "trigger.data.all(a, trigger.data.all(b, trigger.data.all(c, trigger.data.all(d, trigger.data.all(e, a != e)))))"
		}, "spec.trigger.constraints[0].expression", "cost"},
		{"consumer", func(p *quotav1alpha1.GrantCreationPolicy) {
			p.Spec.Target.ResourceGrantTemplate.Spec.ConsumerRef.Kind = "Project"
		}, "spec.target.resourceGrantTemplate.spec.consumerRef", "not Project"},
		{"unregistered", func(p *quotav1alpha1.GrantCreationPolicy) {
			p.Spec.Target.ResourceGrantTemplate.Spec.Allowances[0].ResourceType = w.RT("nothing")
		}, "spec.target.resourceGrantTemplate.spec.allowances[0].resourceType", "not registered"},
	}
	var policies []*quotav1alpha1.GrantCreationPolicy
	for _, tc := range cases {
		if tc.name == "syntax" || tc.name == "template" || tc.name == "user" {
			err := w.C.Create(context.Background(), w.tierPolicyObject(tc.name, "gold", "projects", 1, tc.mutate))
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field+": Invalid value") || !strings.Contains(err.Error(), tc.cause) {
				t.Errorf("%s: want 422 naming %s and %q, got %v", tc.name, tc.field, tc.cause, err)
			}
			continue
		}
		p := w.tierPolicy(tc.name, "gold", "projects", 1, tc.mutate)
		c := w.waitReady(p, metav1.ConditionFalse, policy.ReasonValidationFailed)
		if !strings.Contains(c.Message, tc.field) || !strings.Contains(c.Message, tc.cause) {
			t.Errorf("%s: message %q does not name %s and %q", tc.name, c.Message, tc.field, tc.cause)
		}
		policies = append(policies, p)
	}
	w.configMap("acme", "tier", "gold")
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range policies {
			if g := w.grantsOf(p.Name); len(g) > 0 {
				t.Fatalf("invalid policy %s made grant %s", p.Name, g[0].Name)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	// One loop over the same map fits.
	oneLoop := w.tierPolicy("oneloop", "gold", "projects", 1, func(p *quotav1alpha1.GrantCreationPolicy) {
		p.Spec.Trigger.Constraints = append(p.Spec.Trigger.Constraints, quotav1alpha1.Constraint{Expression: "!has(trigger.data) || trigger.data.all(k, k != 'forbidden')"})
	})
	w.waitReady(oneLoop, metav1.ConditionTrue, policy.ReasonReady)
	w.waitGrants(oneLoop.Name, w.NS+"/acme-oneloop")
	// Registering the missing type makes that policy Ready; it then acts.
	w.Register("nothing")
	last := policies[len(policies)-1]
	w.waitReady(last, metav1.ConditionTrue, policy.ReasonReady)
	w.waitGrants(last.Name, w.NS+"/acme-unregistered")
}

// TestTriggerKindInstalledAfterThePolicy: a policy on a kind no API serves
// waits for it, says so, and acts once its CRD is installed; its watch
// stops when the last policy on the kind goes.
func TestTriggerKindInstalledAfterThePolicy(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "projects")
	group := w.ID + ".example.com"
	watchesBefore := metric(t, "milo_quota_grant_policy_trigger_watches")

	mk := func(name string) *quotav1alpha1.GrantCreationPolicy {
		return w.tierPolicy(name, "gold", "projects", 7, func(p *quotav1alpha1.GrantCreationPolicy) {
			p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: group + "/v1", Kind: "Widget"}
			p.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: "trigger.spec.tier == 'gold'"}}
			p.Spec.Target.ResourceGrantTemplate.Metadata.Labels = nil
		})
	}
	p := mk("widgets")
	c := w.waitReady(p, metav1.ConditionFalse, policy.ReasonValidationFailed)
	if !strings.Contains(c.Message, "waiting for kind Widget") {
		t.Errorf("message %q does not say the policy waits for kind Widget", c.Message)
	}

	ax := apiextensionsclient.NewForConfigOrDie(srv.Config)
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"tier":  {Type: "string"},
							"items": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}},
						}},
					},
				}},
			}},
		},
	}
	if _, err := ax.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ax.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd.Name, metav1.DeleteOptions{})
	})
	w.waitReady(p, metav1.ConditionTrue, policy.ReasonReady)
	waitMetric(t, "milo_quota_grant_policy_trigger_watches", watchesBefore+1)

	widgets := dynamic.NewForConfigOrDie(srv.Config).Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"})
	widget := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w1", "namespace": w.NS},
		"spec":     map[string]any{"tier": "gold"},
	}}
	if _, err := widgets.Namespace(w.NS).Create(ctx, widget, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	grants := w.waitGrants(p.Name, w.NS+"/w1-widgets")
	w.WaitCondition(&grants[0], quotav1alpha1.GrantConditionActive, metav1.ConditionTrue)
	w.WaitBucket(quotatest.N(7, 0, 7), "projects")

	// The kind's schema, read once it is served, types `trigger`: five
	// nested loops over its list are refused for their estimated cost.
	costly := w.tierPolicy("costly", "gold", "projects", 1, func(p *quotav1alpha1.GrantCreationPolicy) {
		p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: group + "/v1", Kind: "Widget"}
		p.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: "trigger.spec.items.all(a, trigger.spec.items.all(b, trigger.spec.items.all(c, trigger.spec.items.all(d, trigger.spec.items.all(e, a != e)))))"}}
		p.Spec.Target.ResourceGrantTemplate.Metadata.Labels = nil
	})
	if c := w.waitReady(costly, metav1.ConditionFalse, policy.ReasonValidationFailed); !strings.Contains(c.Message, "cost") {
		t.Errorf("message %q does not say the cost is too high", c.Message)
	}

	// A second policy shares the kind's watch; the watch stops with the last.
	second := mk("widgets2")
	w.waitReady(second, metav1.ConditionTrue, policy.ReasonReady)
	w.waitGrants(second.Name, w.NS+"/w1-widgets2")
	waitMetric(t, "milo_quota_grant_policy_trigger_watches", watchesBefore+1)
	if err := w.C.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	w.waitGrants(p.Name)
	waitMetric(t, "milo_quota_grant_policy_trigger_watches", watchesBefore+1)
	w.update(second, func() { second.Spec.Disabled = true })
	w.waitReady(second, metav1.ConditionFalse, policy.ReasonDisabled)
	waitMetric(t, "milo_quota_grant_policy_trigger_watches", watchesBefore)
	w.waitGrants(second.Name, w.NS+"/w1-widgets2")
}

// TestMissingTargetNamespace: a grant whose target namespace does not exist
// is not made anywhere else; the policy says it waits for that namespace;
// the grant appears there once it exists.
func TestMissingTargetNamespace(t *testing.T) {
	w := newWorld(t, "projects")
	target := "tenant-" + w.ID
	p := w.tierPolicy("gold", "gold", "projects", 6, func(p *quotav1alpha1.GrantCreationPolicy) {
		p.Spec.Target.ResourceGrantTemplate.Metadata.Namespace = "tenant-{{ trigger.metadata.name }}"
	})
	w.waitReady(p, metav1.ConditionTrue, policy.ReasonReady)
	w.configMap(w.ID, "tier", "gold")
	c := w.waitCondition(p, quotav1alpha1.GrantPolicyConditionGrantsSynced, metav1.ConditionFalse, quotav1alpha1.GrantPolicyReasonWaitingForNamespace)
	if !strings.Contains(c.Message, "waiting for namespace "+target) {
		t.Errorf("message %q does not say it waits for namespace %s", c.Message, target)
	}
	w.waitEvent("", p.Name, quotav1alpha1.GrantPolicyReasonWaitingForNamespace, "waiting for namespace "+target)
	w.stillNoGrants(p.Name, 2*time.Second)

	began := time.Now()
	w.namespace(target)
	w.waitGrants(p.Name, target+"/"+w.ID+"-gold")
	t.Logf("measured: namespace created → waiting grant made %s", time.Since(began))
	w.waitCondition(p, quotav1alpha1.GrantPolicyConditionGrantsSynced, metav1.ConditionTrue, quotav1alpha1.GrantPolicyReasonGrantsSynced)
	w.WaitBucket(quotatest.N(6, 0, 6), "projects")
}

// TestTwoPoliciesOnOneTrigger: each policy keeps its own grant for the same
// object; deleting one takes only its own.
func TestTwoPoliciesOnOneTrigger(t *testing.T) {
	w := newWorld(t, "projects", "seats")
	a := w.tierPolicy("projects", "gold", "projects", 10)
	b := w.tierPolicy("seats", "gold", "seats", 20)
	w.waitReady(a, metav1.ConditionTrue, policy.ReasonReady)
	w.waitReady(b, metav1.ConditionTrue, policy.ReasonReady)
	w.configMap("acme", "tier", "gold")
	w.waitGrants(a.Name, w.NS+"/acme-projects")
	w.waitGrants(b.Name, w.NS+"/acme-seats")
	w.WaitBucket(quotatest.N(10, 0, 10), "projects")
	w.WaitBucket(quotatest.N(20, 0, 20), "seats")
	if err := w.C.Delete(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	w.waitGrants(b.Name)
	w.waitGrants(a.Name, w.NS+"/acme-projects")
}

// TestNameCollision: a rendered name held by a grant the policy did not
// make is left alone and reported.
func TestNameCollision(t *testing.T) {
	w := newWorld(t, "projects")
	held := w.Grant("acme-gold", map[string][]quotatest.Bucket{"projects": {{Amount: 1}}})
	p := w.tierPolicy("gold", "gold", "projects", 10)
	w.waitReady(p, metav1.ConditionTrue, policy.ReasonReady)
	w.configMap("acme", "tier", "gold")
	c := w.waitCondition(p, quotav1alpha1.GrantPolicyConditionGrantsSynced, metav1.ConditionFalse, quotav1alpha1.GrantPolicyReasonNameCollision)
	if !strings.Contains(c.Message, w.NS+"/acme-gold") {
		t.Errorf("message %q does not name the grant", c.Message)
	}
	w.waitEvent("", p.Name, quotav1alpha1.GrantPolicyReasonNameCollision, w.NS+"/acme-gold")
	got := &quotav1alpha1.ResourceGrant{}
	if err := w.C.Get(context.Background(), client.ObjectKeyFromObject(held), got); err != nil {
		t.Fatal(err)
	}
	if got.Labels[quotav1alpha1.GrantPolicyLabel] != "" || got.Spec.Allowances[0].Buckets[0].Amount != 1 {
		t.Errorf("the colliding grant was overwritten: %+v", got)
	}
	w.WaitBucket(quotatest.N(1, 0, 1), "projects")
}

// TestGenerateNameTemplate: a template with generateName only makes one
// grant per object, found again by its labels: never a second one.
func TestGenerateNameTemplate(t *testing.T) {
	w := newWorld(t, "projects")
	p := w.tierPolicy("gen", "gold", "projects", 3, func(p *quotav1alpha1.GrantCreationPolicy) {
		p.Spec.Target.ResourceGrantTemplate.Metadata.Name = ""
		p.Spec.Target.ResourceGrantTemplate.Metadata.GenerateName = "{{ trigger.metadata.name }}-"
	})
	w.waitReady(p, metav1.ConditionTrue, policy.ReasonReady)
	cm := w.configMap("acme", "tier", "gold")
	var grants []quotav1alpha1.ResourceGrant
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		grants = w.grantsOf(p.Name)
		return len(grants) > 0, nil
	})
	if err != nil {
		t.Fatal("no grant was made")
	}
	name := grants[0].Name
	if !strings.HasPrefix(name, "acme-") || name == "acme-" {
		t.Errorf("grant name %q was not generated from acme-", name)
	}
	for i := range 5 {
		w.update(cm, func() { cm.Data = map[string]string{"n": fmt.Sprint(i)} })
	}
	w.update(p, func() { p.Spec.Target.ResourceGrantTemplate.Spec.Allowances[0].Buckets[0].Amount = 8 })
	w.WaitBucket(quotatest.N(8, 0, 8), "projects")
	time.Sleep(time.Second)
	if got := w.grantsOf(p.Name); len(got) != 1 || got[0].Name != name {
		t.Fatalf("grants %v, want only %s", got, name)
	}
}

// TestClusterScopedTriggerWithoutNamespace: the seed's template names no
// namespace; for a cluster-scoped trigger the grant goes to the system
// namespace, under a name stable across restarts.
func TestClusterScopedTriggerWithoutNamespace(t *testing.T) {
	w := newWorld(t, "projects")
	name := "tenant-" + w.ID
	p := w.tierPolicy("ns", "gold", "projects", 2, func(p *quotav1alpha1.GrantCreationPolicy) {
		p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "Namespace"}
		p.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: fmt.Sprintf("trigger.metadata.name == %q", name)}}
		p.Spec.Target.ResourceGrantTemplate.Metadata = quotav1alpha1.TemplateMetadata{}
	})
	w.waitReady(p, metav1.ConditionTrue, policy.ReasonReady)
	w.namespace(name)
	var grants []quotav1alpha1.ResourceGrant
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		grants = w.grantsOf(p.Name)
		return len(grants) == 1, nil
	})
	if err != nil {
		t.Fatalf("grants %v, want one", grants)
	}
	if grants[0].Namespace != systemNamespace || !strings.HasPrefix(grants[0].Name, p.Name+"-") {
		t.Errorf("grant %s/%s, want %s-<hash> in %s", grants[0].Namespace, grants[0].Name, p.Name, systemNamespace)
	}
	if _, ok := grants[0].Labels[quotav1alpha1.GrantPolicyLabelTriggerNamespace]; ok {
		t.Errorf("a cluster-scoped trigger's grant has a trigger-namespace label: %v", grants[0].Labels)
	}
	w.WaitBucket(quotatest.N(2, 0, 2), "projects")
	if err := w.C.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	w.waitGrants(p.Name)
}

// TestGrantChangedByHandIsPutBack: the engine keeps its grants as rendered;
// a grant deleted or edited by hand is made again.
func TestGrantChangedByHandIsPutBack(t *testing.T) {
	w := newWorld(t, "projects")
	p := w.tierPolicy("gold", "gold", "projects", 10)
	w.waitReady(p, metav1.ConditionTrue, policy.ReasonReady)
	w.configMap("acme", "tier", "gold")
	grants := w.waitGrants(p.Name, w.NS+"/acme-gold")
	g := &grants[0]
	w.update(g, func() { g.Spec.Allowances[0].Buckets[0].Amount = 1000 })
	w.WaitBucket(quotatest.N(10, 0, 10), "projects")
	if err := w.C.Delete(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		got := w.grantsOf(p.Name)
		return len(got) == 1 && got[0].UID != g.UID, nil
	})
	if err != nil {
		t.Fatal("the deleted grant was not made again")
	}
	w.WaitBucket(quotatest.N(10, 0, 10), "projects")
}

// TestTriggerToActiveGrantLatency measures, over sequential ConfigMaps,
// the time from the create to the grant's Active condition.
func TestTriggerToActiveGrantLatency(t *testing.T) {
	quotatest.Exclusive(t)
	w := newWorld(t, "projects")
	p := w.tierPolicy("gold", "gold", "projects", 1)
	w.waitReady(p, metav1.ConditionTrue, policy.ReasonReady)
	const n = 20
	var took []time.Duration
	for i := range n {
		began := time.Now()
		name := fmt.Sprintf("cm-%02d", i)
		w.configMap(name, "tier", "gold")
		g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: w.NS, Name: name + "-gold"}}
		err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			if err := w.C.Get(ctx, client.ObjectKeyFromObject(g), g); err != nil {
				return false, nil
			}
			return meta.IsStatusConditionTrue(g.Status.Conditions, quotav1alpha1.GrantConditionActive), nil
		})
		if err != nil {
			t.Fatalf("grant %s never became Active", g.Name)
		}
		took = append(took, time.Since(began))
	}
	slices.Sort(took)
	median, p90 := took[n/2], took[n*9/10]
	t.Logf("measured: ConfigMap create → Active grant over %d: median %s, p90 %s, max %s", n, median, p90, took[n-1])
	// The goal, a median under 1 s, is measured here alone
	// (docs/grant-policies.md, "Measured"). Bound 5 s, at least 5x the
	// CI-load median (docs/benchmarks.md): a median of 101 ms here alone
	// (3 runs).
	timed.Within(t, "ConfigMap create → Active grant, median of 20", median, 5*time.Second)
	w.WaitBucket(quotatest.N(n, 0, n), "projects")
}

// TestTriggerKindEdited: a policy edited to watch another kind takes back
// the grants it made for objects of the old kind and gives the new kind's.
func TestTriggerKindEdited(t *testing.T) {
	w := newWorld(t, "projects")
	p := w.tierPolicy("gold", "gold", "projects", 4)
	w.waitReady(p, metav1.ConditionTrue, policy.ReasonReady)
	w.configMap("acme", "tier", "gold")
	w.waitGrants(p.Name, w.NS+"/acme-gold")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "beta", Namespace: w.NS, Labels: map[string]string{"tier": "gold"}}}
	if err := w.C.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	w.update(p, func() { p.Spec.Trigger.Resource.Kind = "Secret" })
	w.waitReady(p, metav1.ConditionTrue, policy.ReasonReady)
	grants := w.waitGrants(p.Name, w.NS+"/beta-gold")
	if grants[0].Labels[quotav1alpha1.GrantPolicyLabelTriggerKind] != "Secret" {
		t.Errorf("grant labels %v, want trigger-kind Secret", grants[0].Labels)
	}
	w.WaitBucket(quotatest.N(4, 0, 4), "projects")
}

// TestRenderFailureIsReported: a template that fails on an object (a field
// it reads is missing) makes nothing for it and says so on the policy; once
// the object has the field, its grant is made.
func TestRenderFailureIsReported(t *testing.T) {
	w := newWorld(t, "projects")
	p := w.tierPolicy("gold", "gold", "projects", 2, func(p *quotav1alpha1.GrantCreationPolicy) {
		p.Spec.Target.ResourceGrantTemplate.Spec.ConsumerRef.Name = "{{ trigger.data.org }}"
	})
	w.waitReady(p, metav1.ConditionTrue, policy.ReasonReady)
	cm := w.configMap("acme", "tier", "gold")
	c := w.waitCondition(p, quotav1alpha1.GrantPolicyConditionGrantsSynced, metav1.ConditionFalse, quotav1alpha1.GrantPolicyReasonRenderFailed)
	if !strings.Contains(c.Message, "ConfigMap "+w.NS+"/acme") {
		t.Errorf("message %q does not name the object", c.Message)
	}
	w.stillNoGrants(p.Name, time.Second)
	w.update(cm, func() { cm.Data = map[string]string{"org": w.Org.Name} })
	grants := w.waitGrants(p.Name, w.NS+"/acme-gold")
	if grants[0].Spec.ConsumerRef.Name != w.Org.Name {
		t.Errorf("consumer %q, want %q", grants[0].Spec.ConsumerRef.Name, w.Org.Name)
	}
	w.waitCondition(p, quotav1alpha1.GrantPolicyConditionGrantsSynced, metav1.ConditionTrue, quotav1alpha1.GrantPolicyReasonGrantsSynced)
	w.WaitBucket(quotatest.N(2, 0, 2), "projects")

	// A rendered label value the API server refuses: reported, the grant
	// kept as it was. The object has the value before the template reads
	// it, so the only failure to report is the API server's refusal.
	w.update(cm, func() { cm.Data["note"] = "not a label value!" })
	w.update(p, func() {
		p.Spec.Target.ResourceGrantTemplate.Metadata.Labels = map[string]string{"note": "{{ trigger.data.note }}"}
	})
	w.waitConditionSaying(p, quotav1alpha1.GrantPolicyConditionGrantsSynced, metav1.ConditionFalse, quotav1alpha1.GrantPolicyReasonRenderFailed, "refuses")
	w.WaitBucket(quotatest.N(2, 0, 2), "projects")
	w.update(cm, func() { cm.Data["note"] = "fine" })
	grants = w.waitGrants(p.Name, w.NS+"/acme-gold")
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		grants = w.waitGrants(p.Name, w.NS+"/acme-gold")
		return grants[0].Labels["note"] == "fine", nil
	})
	if err != nil {
		t.Errorf("grant labels %v, want note=fine", grants[0].Labels)
	}
}

// TestGrantsOfPoliciesTriggerNothing: a policy on ResourceGrants gives a
// grant for a grant written by hand, but never for a grant a policy made,
// so it cannot feed on its own grants.
func TestGrantsOfPoliciesTriggerNothing(t *testing.T) {
	w := newWorld(t, "projects")
	p := w.tierPolicy("loop", "gold", "projects", 1, func(p *quotav1alpha1.GrantCreationPolicy) {
		p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: quotav1alpha1.SchemeGroupVersion.String(), Kind: "ResourceGrant"}
		p.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: fmt.Sprintf("trigger.metadata.namespace == %q", w.NS)}}
		p.Spec.Target.ResourceGrantTemplate.Metadata.Labels = nil
	})
	w.waitReady(p, metav1.ConditionTrue, policy.ReasonReady)
	w.Grant("seed", map[string][]quotatest.Bucket{"projects": {{Amount: 1}}})
	w.waitGrants(p.Name, w.NS+"/seed-loop")
	time.Sleep(2 * time.Second)
	w.waitGrants(p.Name, w.NS+"/seed-loop")
	w.WaitBucket(quotatest.N(2, 0, 2), "projects")
}
