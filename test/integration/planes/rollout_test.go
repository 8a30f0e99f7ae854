package planes

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/members"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// Modes Audit and Warn apply in a project's plane and through a member
// cluster's webhook as at the root: the create is admitted and nothing is
// charged, and a consumer the requester may not charge is refused all the
// same — a project member cannot park objects charged to another project,
// nor a member cluster's user objects charged to an organization it may
// not claim.
func TestRolloutModesInAPlaneAndThroughAMemberCluster(t *testing.T) {
	ctx := context.Background()
	w := newWorldWithoutPolicy(t, "rollmode", "ConfigMap", "a", "b")
	w.grant("Project", w.projects[0], 5)
	w.grant("Project", w.projects[1], 5)
	ccp := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: w.id}}
	ccp.Spec.Mode = quotav1alpha1.PolicyModeAudit
	ccp.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "ConfigMap"}
	ccp.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: fmt.Sprintf("trigger.metadata.?labels.world.orValue('') == %q", w.id)}}
	ccp.Spec.Target.ResourceClaimTemplate.Spec.ConsumerRef = quotav1alpha1.TemplateConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project",
		Name: fmt.Sprintf("{{ trigger.metadata.?labels.project.orValue(%q) }}", w.projects[0])}
	ccp.Spec.Target.ResourceClaimTemplate.Spec.Requests = []quotav1alpha1.ClaimTemplateRequest{{ResourceType: w.rt, Amount: intstr.FromInt32(1)}}
	must(t, w.admin.Create(ctx, ccp), "creating ClaimCreationPolicy %s", w.id)
	quotatest.NewFixture(t, w.admin).WaitCondition(ccp, quotav1alpha1.PolicyConditionReady, metav1.ConditionTrue)

	// A member of project a, in a's plane.
	member := kubernetes.NewForConfigOrDie(planeConfig(memberConfig(t, w.org, w.projects[0], "dev"), projectPlane(w.projects[0])))
	// Admission has the policy once a dry run of an object charged to
	// project b is refused for it (a dry run is judged as the create).
	eventually(t, 30*time.Second, "the policy in Audit in the plane's admission", func(ctx context.Context) error {
		cm := w.configMap("probe")
		cm.Labels["project"] = w.projects[1]
		_, err := member.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "mode Audit") {
			return fmt.Errorf("a dry run charged to project %s: %v", w.projects[1], err)
		}
		return nil
	})
	if _, err := member.CoreV1().ConfigMaps("default").Create(ctx, w.configMap("own"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a project member creating a ConfigMap charged to its own project under mode Audit: %v", err)
	}
	parked := w.configMap("parked")
	parked.Labels["project"] = w.projects[1]
	_, err := member.CoreV1().ConfigMaps("default").Create(ctx, parked, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "mode Audit") || !strings.Contains(err.Error(), w.projects[1]) {
		t.Fatalf("a member of project %s parking a ConfigMap charged to project %s under mode Audit: %v; want 403 naming it and the mode", w.projects[0], w.projects[1], err)
	}
	claims := &quotav1alpha1.ResourceClaimList{}
	must(t, w.admin.List(ctx, claims, client.MatchingLabels{quotav1alpha1.LabelPolicy: w.id}), "listing the policy's claims")
	if len(claims.Items) != 0 {
		t.Errorf("mode Audit made %d claims in a plane", len(claims.Items))
	}

	// A member cluster's webhook: its user charger may claim project a only.
	f := quotatest.NewFixture(t, w.admin)
	const cluster = "rollmode-east"
	must(t, w.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: members.Namespace(cluster)}}), "creating the cluster's namespace")
	const charger = "rollmode-charger"
	must(t, w.admin.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: charger}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{rmv1alpha1.GroupName}, Resources: []string{"projects"}, ResourceNames: []string{w.projects[0]}, Verbs: []string{"claim"}}}}), "a role charging project a")
	inPlane := members.MemberName(cluster, charger, true)
	must(t, w.admin.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: charger},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: inPlane}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: charger}}), "binding %s", inPlane)
	quotatest.WaitAllowed(t, []kubernetes.Interface{kubernetes.NewForConfigOrDie(srv.Config)}, inPlane, nil,
		&authorizationv1.ResourceAttributes{Verb: "claim", Group: rmv1alpha1.GroupName, Resource: "projects", Name: w.projects[0]})
	review := func(name, project string) []byte {
		cm := w.configMap(name)
		cm.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
		cm.Namespace = f.NS
		cm.Labels["project"] = project
		return createReview(t, cm, "configmaps", charger)
	}
	code, body := call(t, srv.Config, nil, http.MethodPost, members.ReviewPath(cluster), review("member-own", w.projects[0]))
	if code != http.StatusOK || !strings.Contains(body, `"allowed":true`) {
		t.Fatalf("a member cluster's review charged to project a under mode Audit: %d %s, want allowed", code, body)
	}
	code, body = call(t, srv.Config, nil, http.MethodPost, members.ReviewPath(cluster), review("member-parked", w.projects[1]))
	if code != http.StatusOK || !strings.Contains(body, `"allowed":false`) || !strings.Contains(body, "mode Audit") {
		t.Fatalf("a member cluster's review charged to project b, which its user may not claim, under mode Audit: %d %s; want refused, naming the mode", code, body)
	}
	must(t, w.admin.List(ctx, claims, client.MatchingLabels{quotav1alpha1.LabelPolicy: w.id}), "listing the policy's claims")
	if len(claims.Items) != 0 {
		t.Errorf("mode Audit made %d claims through a member cluster", len(claims.Items))
	}
}
