package owning

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/pkg/client/clientset/versioned"
	"github.com/quotaplane/quotaplane/pkg/quotaclaim"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestADryRunClaimAnswersOnlyAfterAuthorization: a service account that may
// create ResourceClaims in its namespace (the shipped quotaplane-quota-user,
// a real token) but has no verb claim on the consumer
// gets, for a dry-run claim and for the claim library's Check, the
// authorization refusal and nothing else — no numbers of the consumer's
// quota in the refusal of a claim that would not fit, no "would be granted"
// warning for one that would.
func TestADryRunClaimAnswersOnlyAfterAuthorization(t *testing.T) {
	ctx := context.Background()
	s := newService(t, 3)
	// A real token of a service account holding the shipped
	// quotaplane-quota-user in the fixture's namespace: it may create
	// claims there, and has no verb claim on the organization.
	tok, user := quotatest.ServiceAccountToken(t, srv.Config, s.f.NS, "mallory", "quotaplane-quota-user", s.f.NS)
	seen := &quotatest.Warnings{}
	cfg := rest.AnonymousClientConfig(srv.Config)
	cfg.BearerToken = tok
	cfg.WarningHandler = seen
	cs := versioned.NewForConfigOrDie(cfg)
	claim := func(name string, amount int64) *quotav1alpha1.ResourceClaim {
		return &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.f.NS}, Spec: quotav1alpha1.ResourceClaimSpec{
			ConsumerRef: s.f.Org, Requests: s.cpu(amount)}}
	}
	for name, amount := range map[string]int64{"fits": 1, "does-not-fit": 100} {
		_, err := cs.QuotaV1alpha1().ResourceClaims(s.f.NS).Create(ctx, claim(name, amount), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		got := seen.All()
		seen.Reset()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `verb "claim"`) {
			t.Errorf("a dry-run claim of %d (%s) by a user without verb claim: want 403 for the verb claim, got %v", amount, name, err)
		}
		if err != nil && (strings.Contains(err.Error(), "available") || strings.Contains(err.Error(), "would")) {
			t.Errorf("the refusal of a dry-run claim of %d tells the consumer's quota: %v", amount, err)
		}
		for _, w := range got {
			if strings.Contains(w, "would") || strings.Contains(w, "available") {
				t.Errorf("a dry-run claim of %d by a user without verb claim was warned %q", amount, w)
			}
		}
	}
	checker := &quotaclaim.Claimer{Client: cs, Namespace: s.f.NS, Service: "compute", Identity: user}
	for _, amount := range []int64{1, 100} {
		_, err := checker.Check(ctx, s.resource(fmt.Sprintf("check-%d", amount)), s.f.Org, s.cpu(amount))
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `verb "claim"`) || strings.Contains(err.Error(), "available") || strings.Contains(err.Error(), "would") {
			t.Errorf("Check of %d by a user without verb claim: want only the 403 for the verb claim, got %v", amount, err)
		}
		got := seen.All()
		seen.Reset()
		if len(got) > 0 {
			t.Errorf("Check of %d by a user without verb claim was warned %q", amount, got)
		}
	}
}
