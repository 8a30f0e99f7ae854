package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/policy/triggerschema"
)

// nestedAll is depth all() loops over a ConfigMap's data, one in another.
func nestedAll(depth int) string {
	e := "true"
	for i := depth; i > 0; i-- {
		e = fmt.Sprintf("trigger.data.all(k%d, %s)", i, e)
	}
	return e
}

// TestPolicyCostJudgedOnTheTriggerSchema: with `trigger` typed from the
// ConfigMap schema the server serves, a policy with one all() over a
// ConfigMap's data is Ready and charges; one with five nested all() loops is
// refused when judged (ValidationFailed, naming the constraint, the estimate
// and the limit), is never enforced, and ConfigMaps are created freely
// instead of failing with a 500.
func TestPolicyCostJudgedOnTheTriggerSchema(t *testing.T) {
	one := newWorld(t, 1)
	p := one.Policy("one-loop", "v1", "ConfigMap", "secrets", intstr.FromInt32(1), func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Trigger.Constraints = append(p.Spec.Trigger.Constraints, quotav1alpha1.Constraint{Expression: "!has(trigger.data) || trigger.data.all(k, !k.startsWith('free-'))"})
	})
	one.WaitPolicyReady(p, metav1.ConditionTrue)
	if err := one.C.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: one.NS}, Data: map[string]string{"x": "1"}}); err != nil {
		t.Fatal(err)
	}
	err := one.C.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: one.NS}, Data: map[string]string{"y": "1"}})
	one.expectQuotaDenial(err, 1, 0, 1)

	five := newWorld(t, 1)
	p = five.Policy("five-loops", "v1", "ConfigMap", "secrets", intstr.FromInt32(1), func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Trigger.Constraints = append(p.Spec.Trigger.Constraints, quotav1alpha1.Constraint{Expression: nestedAll(5)})
	})
	c := five.WaitPolicyReady(p, metav1.ConditionFalse)
	if c.Reason != "ValidationFailed" {
		t.Errorf("reason %s, want ValidationFailed", c.Reason)
	}
	for _, want := range []string{"spec.trigger.constraints[1].expression: ", "estimated cost", fmt.Sprintf("exceeds the limit %d", 10_000_000)} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("message %q lacks %q", c.Message, want)
		}
	}
	data := map[string]string{}
	for i := range 30 {
		data[fmt.Sprint("k", i)] = "v"
	}
	for i := range 3 {
		if err := five.C.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm", i), Namespace: five.NS}, Data: data}); err != nil {
			t.Fatalf("a ConfigMap under a refused policy: %v", err)
		}
	}
	if n := len(five.claims()); n != 0 {
		t.Errorf("a refused policy made %d claims", n)
	}
}

// TestInvalidLiteralsRefusedWhenJudged: a claim template's literal name
// that no claim may have is refused at create, naming the field, rather
// than failing every create later.
func TestInvalidLiteralsRefusedWhenJudged(t *testing.T) {
	w := newWorld(t, 1)
	for _, tc := range []struct {
		name  string
		edit  func(*quotav1alpha1.TemplateMetadata)
		field string
	}{
		{"name", func(m *quotav1alpha1.TemplateMetadata) { m.Name = "INVALID_NAME" }, "spec.target.resourceClaimTemplate.metadata.name: "},
		{"both", func(m *quotav1alpha1.TemplateMetadata) { m.Name, m.GenerateName = "a", "b-" }, "spec.target.resourceClaimTemplate.metadata.generateName: "},
		{"unbalanced", func(m *quotav1alpha1.TemplateMetadata) { m.Labels = map[string]string{"by": "{{ user.name"} }, "spec.target.resourceClaimTemplate.metadata.labels[by]: "},
	} {
		p := w.PolicyObject("literal-"+tc.name, "v1", "Secret", "secrets", intstr.FromInt32(1), func(p *quotav1alpha1.ClaimCreationPolicy) {
			tc.edit(&p.Spec.Target.ResourceClaimTemplate.Metadata)
		})
		err := w.C.Create(context.Background(), p)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field+"Invalid value") {
			t.Errorf("%s: want 422 naming %s, got %v", tc.name, tc.field, err)
		}
	}
	if err := w.secret("free"); err != nil {
		t.Fatalf("a create under refused policies: %v", err)
	}
}

// TestClaimMetadataRendered: the claim's namespace, labels and annotations
// are rendered from trigger, user and requestInfo; quotaplane's own
// annotations are never replaced by the template's.
func TestClaimMetadataRendered(t *testing.T) {
	w := newWorld(t, 5)
	target := w.NS + "-claims"
	if err := w.C.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: target}}); err != nil {
		t.Fatal(err)
	}
	p := w.Policy("rendered", "v1", "Secret", "secrets", intstr.FromInt32(1), func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Target.ResourceClaimTemplate.Metadata = quotav1alpha1.TemplateMetadata{
			GenerateName: "{{ .trigger.metadata.name }}-",
			Namespace:    "{{ trigger.metadata.namespace }}-claims",
			Labels:       map[string]string{"created-by": "{{ user.name.replace(':', '.') }}", "tier": "{{ trigger.metadata.labels.tier }}"},
			Annotations: map[string]string{"example.com/request": "{{ requestInfo.verb }} {{ requestInfo.resource }}",
				"quota.miloapis.com/policy": "{{ 'forged' }}"},
		}
	})
	w.WaitPolicyReady(p, metav1.ConditionTrue, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: w.NS, Labels: map[string]string{"tier": "gold"}}})
	if err := w.secret("s1", "tier", "gold"); err != nil {
		t.Fatal(err)
	}
	review := &authenticationv1.SelfSubjectReview{}
	kube := kubernetes.NewForConfigOrDie(srv.Config)
	review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), review, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	user := strings.ReplaceAll(review.Status.UserInfo.Username, ":", ".")
	// The claim is written once the Secret is stored, after the answer.
	list := &quotav1alpha1.ResourceClaimList{}
	_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		err := w.C.List(ctx, list, client.InNamespace(target))
		return err == nil && len(list.Items) > 0, nil
	})
	if len(list.Items) != 1 {
		t.Fatalf("%d claims in %s, want 1 (in %s: %d)", len(list.Items), target, w.NS, len(w.claims()))
	}
	c := list.Items[0]
	if !strings.HasPrefix(c.Name, "s1-") {
		t.Errorf("claim name %s does not start with the rendered generateName s1-", c.Name)
	}
	for k, want := range map[string]string{"created-by": user, "tier": "gold"} {
		if c.Labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], want)
		}
	}
	if got := c.Annotations["example.com/request"]; got != "create secrets" {
		t.Errorf("annotation example.com/request = %q, want %q", got, "create secrets")
	}
	if got := c.Annotations["quota.miloapis.com/policy"]; got != p.Name {
		t.Errorf("quotaplane's policy annotation = %q, want %q: a template must not replace it", got, p.Name)
	}
}

// TestTriggerSchemaResolver: the resolver finds built-in kinds and CRDs as
// the server serves them, and says not found for a kind it does not serve.
func TestTriggerSchemaResolver(t *testing.T) {
	r := triggerschema.New(kubernetes.NewForConfigOrDie(srv.Config).Discovery(), 0)
	for _, tc := range []struct{ apiVersion, kind, field string }{
		{"v1", "ConfigMap", "data"},
		{"coordination.k8s.io/v1", "Lease", "spec"},
		{quotav1alpha1.SchemeGroupVersion.String(), "ResourceClaim", "spec"},
	} {
		s, err := r.Resolve(tc.apiVersion, tc.kind)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.apiVersion, tc.kind, err)
		}
		if _, ok := s.Properties[tc.field]; !ok {
			t.Errorf("%s %s: schema without %s", tc.apiVersion, tc.kind, tc.field)
		}
	}
	if _, err := r.Resolve("example.com/v1", "Nothing"); !errors.Is(err, triggerschema.ErrNotFound) {
		t.Errorf("an unserved kind: %v, want not found", err)
	}
}
