package hardening

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/members"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestAMemberClustersClaimsAreItsWebhooks: a claim labelled with member
// cluster east cannot be looked up by the quota plane; only who may release
// east's claims deletes it. A webhook credential bound to the shipped
// quotaplane-member-webhook role cluster-wide, with the shipped
// quotaplane-member-cluster role for west only, is refused; bound for east
// too, it deletes it.
func TestAMemberClustersClaimsAreItsWebhooks(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 10)
	east, west := "e"+w.ID, "w"+w.ID
	for _, ns := range []string{members.Namespace(east), members.Namespace(west)} {
		if err := w.C.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	// A claim of east's Secret default/s0, as the quota plane made it from
	// east's review; made here by the administrator, who speaks for every
	// cluster.
	claim := w.ClaimObject("east-s0", quotatest.Req{RT: "units", Amount: 1})
	claim.Namespace = members.Namespace(east)
	claim.Labels = map[string]string{members.Label: east}
	claim.Annotations = map[string]string{quotav1alpha1.AnnotationResourceUID: "east-uid-s0", quotav1alpha1.AnnotationResource: "secrets.v1."}
	claim.Spec.ResourceRef = &quotav1alpha1.ResourceRef{Kind: "Secret", Namespace: "default", Name: "s0"}
	if err := w.C.Create(ctx, claim); err != nil {
		t.Fatalf("the administrator creating a claim of cluster %s: %v", east, err)
	}

	sa := "webhook-" + w.ID
	token, _ := quotatest.ServiceAccountToken(t, srv.Config, members.Namespace(west), sa, "quotaplane-member-webhook", "")
	quotatest.ServiceAccountToken(t, srv.Config, members.Namespace(west), sa, "quotaplane-member-cluster", members.Namespace(west))
	cfg := rest.AnonymousClientConfig(srv.Config)
	cfg.BearerToken = token
	webhook := quotatest.NewClient(t, cfg)
	eventually(t, 10*time.Second, "the webhook credential bound", func() bool {
		return webhook.List(ctx, &quotav1alpha1.ResourceClaimList{}, client.InNamespace(claim.Namespace)) == nil
	})
	err := webhook.Delete(ctx, claim.DeepCopy())
	if !apierrors.IsForbidden(err) {
		t.Fatalf("west's webhook deleting a claim of cluster %s: want 403, got %v", east, err)
	}
	mustContain(t, err, "member cluster "+east, `verb "release"`, "quotaplane-member-cluster")
	if err := w.C.Get(ctx, client.ObjectKeyFromObject(claim), &quotav1alpha1.ResourceClaim{}); err != nil {
		t.Fatalf("the claim of cluster %s after the refused delete: %v", east, err)
	}

	// Bound for east as well, it releases east's claim.
	quotatest.ServiceAccountToken(t, srv.Config, members.Namespace(west), sa, "quotaplane-member-cluster", members.Namespace(east))
	var last error
	eventually(t, 10*time.Second, "east's webhook releasing its claim", func() bool {
		last = webhook.Delete(ctx, claim.DeepCopy())
		return last == nil || apierrors.IsNotFound(last)
	})
	if last != nil && !strings.Contains(last.Error(), "not found") {
		t.Fatal(last)
	}
}
