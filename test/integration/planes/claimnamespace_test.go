package planes

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/test/quotatest"
	"github.com/quotaplane/quotaplane/test/tools"
)

// TestAPlaneClaimIsShownInTheNamespaceItsTemplateNames: the reference's
// control-plane scenario renders a Secret's claim into the Secret's own
// namespace of the plane ("{{ requestInfo.namespace }}") and waits for it
// there (kubectl wait resourceclaims -n default -l …). The claim is kept at
// the root in the project's quota namespace, as every plane claim, and
// shown in the plane's default — not in its milo-system; a claim created in
// a plane namespace is accepted and shown there too.
func TestAPlaneClaimIsShownInTheNamespaceItsTemplateNames(t *testing.T) {
	kubectl := tools.Require(t, tools.Kubectl)
	ctx := context.Background()
	w := newWorldWithoutPolicy(t, "pns", "ConfigMap", "web")
	project := w.projects[0]
	w.grant("Project", project, 5)
	ccp := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: w.id}}
	ccp.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "ConfigMap"}
	ccp.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: fmt.Sprintf("trigger.metadata.?labels.world.orValue('') == %q", w.id)}}
	ccp.Spec.Target.ResourceClaimTemplate.Metadata = quotav1alpha1.TemplateMetadata{
		Name: "{{ trigger.metadata.name }}-claim", Namespace: "{{ requestInfo.namespace }}", Labels: map[string]string{"scenario": w.id}}
	ccp.Spec.Target.ResourceClaimTemplate.Spec.Requests = []quotav1alpha1.ClaimTemplateRequest{{ResourceType: w.rt, Amount: intstr.FromInt32(1)}}
	must(t, w.admin.Create(ctx, ccp), "creating the ClaimCreationPolicy")
	quotatest.NewFixture(t, w.admin).WaitCondition(ccp, quotav1alpha1.PolicyConditionReady, metav1.ConditionTrue)

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "default", Labels: map[string]string{"world": w.id}}}
	_, err := w.planeKube(project).CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
	must(t, err, "creating a ConfigMap in the plane's default")

	// As the scenario waits for it: kubectl, through the plane's URL.
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	out, err := exec.Command(quotatest.BuildBinary(t), "kubeconfig", "--data-dir", srv.DataDir, "--project", project).Output()
	must(t, err, "quotaplane kubeconfig --project")
	must(t, os.WriteFile(kc, out, 0o600), "writing the kubeconfig")
	// The claim is written moments after the ConfigMap is stored, not
	// before its create answers (docs/compatibility.md); kubectl wait -l
	// with nothing matching yet fails at once, so wait for it to appear.
	pc := quotatest.NewClient(t, planeConfig(srv.Config, projectPlane(project)))
	deadline := time.Now().Add(15 * time.Second)
	for {
		shown := &quotav1alpha1.ResourceClaimList{}
		must(t, pc.List(ctx, shown, client.InNamespace("default"), client.MatchingLabels{"scenario": w.id}), "listing the plane's claims in default")
		if len(shown.Items) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("15 s after the ConfigMap's create, the plane's default shows no claim labelled scenario=%s", w.id)
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitOut, err := exec.Command(kubectl, "--kubeconfig", kc, "wait", "resourceclaims", "-n", "default", "-l", "scenario="+w.id,
		"--for=condition=Granted", "--timeout=30s").CombinedOutput()
	if err != nil || !strings.Contains(string(waitOut), "app-claim condition met") {
		t.Fatalf("kubectl wait resourceclaims -n default -l scenario=%s in the plane: %v\n%s", w.id, err, waitOut)
	}

	got := &quotav1alpha1.ResourceClaim{}
	must(t, pc.Get(ctx, client.ObjectKey{Namespace: "default", Name: "app-claim"}, got), "reading the claim in the plane's default")
	if got.Namespace != "default" {
		t.Errorf("the claim read in default shows namespace %q", got.Namespace)
	}
	if err := pc.Get(ctx, client.ObjectKey{Namespace: "milo-system", Name: "app-claim"}, &quotav1alpha1.ResourceClaim{}); !apierrors.IsNotFound(err) {
		t.Errorf("the claim is also shown in the plane's milo-system: %v", err)
	}
	all := &quotav1alpha1.ResourceClaimList{}
	must(t, pc.List(ctx, all, client.MatchingLabels{"scenario": w.id}), "listing the plane's claims in every namespace")
	if len(all.Items) != 1 || all.Items[0].Namespace != "default" {
		t.Errorf("the plane lists %d claims of the scenario (%+v); want one, in default", len(all.Items), all.Items)
	}
	// At the root it is where every plane claim is kept.
	root := &quotav1alpha1.ResourceClaim{}
	must(t, w.admin.Get(ctx, client.ObjectKey{Namespace: planes.ProjectNamespace(project), Name: "app-claim"}, root), "reading the claim at the root")
	if root.Labels[quotav1alpha1.LabelPlaneNamespace] != "default" {
		t.Errorf("the root's claim has label %s=%q; want default", quotav1alpha1.LabelPlaneNamespace, root.Labels[quotav1alpha1.LabelPlaneNamespace])
	}

	// A claim created in a plane namespace: accepted, shown there.
	direct := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "by-hand", Namespace: "default"}, Spec: quotav1alpha1.ResourceClaimSpec{
		ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: project},
		Requests:    []quotav1alpha1.ResourceRequest{{ResourceType: quotav1alpha1.ResourceType(w.rt), Amount: 1}}}}
	must(t, pc.Create(ctx, direct), "creating a claim in the plane's default")
	eventually(t, 30*time.Second, "the hand-made claim granted, in default", func(ctx context.Context) error {
		c := &quotav1alpha1.ResourceClaim{}
		if err := pc.Get(ctx, client.ObjectKey{Namespace: "default", Name: "by-hand"}, c); err != nil {
			return err
		}
		if c.Namespace != "default" || c.Status.Conditions == nil {
			return fmt.Errorf("namespace %q, conditions %+v", c.Namespace, c.Status.Conditions)
		}
		return nil
	})
}
