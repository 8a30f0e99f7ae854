package inforce

import (
	"fmt"
	"testing"
	"time"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/charge/inforce/inforcetest"
)

// TestFirstCreateSeesEveryPolicy: a replica's first create (the plugin starts
// its policy watch on first use) is judged against every stored policy.
// Before, it waited only for the watch's store: a policy listed but not yet
// through the index handler was not applied, and the create was admitted
// uncharged — the failover over-grant TestDeletedLedgerCannotRevivePausedLeader
// found. Many policies make the handler lag its store by far more than the
// wait's poll period, so the old wait fails this every time.
func TestFirstCreateSeesEveryPolicy(t *testing.T) {
	const n = 300
	var policies []*quotav1alpha1.ClaimCreationPolicy
	for i := range n {
		policies = append(policies, inforcetest.ReadyPolicy(fmt.Sprintf("policy-%03d", i), "Secret", "example.com/secrets",
			fmt.Sprintf("trigger.metadata.namespace == 'ns-%d'", i)))
	}
	dyn := inforcetest.Dynamic(t, policies...)
	x := New(10 * time.Second)
	x.Dynamic = dyn
	drained := make(chan struct{})
	t.Cleanup(func() { close(drained) })
	x.Drained = drained

	got, err := x.InForce("", "Secret")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("the first create was judged against %d of the %d stored policies for Secrets: the others would let it in uncharged", len(got), n)
	}
}
