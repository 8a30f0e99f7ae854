package accounting

import (
	"strings"
	"testing"

	"github.com/quotaplane/quotaplane/internal/quota"
)

// TestRemovedRegistrationEndsItsGrantsAndGroups: what follows in the claims
// when the books drop a registration. Its group grant no longer selects
// anyone, and a claim waiting on it is decided again and refused as not
// registered.
func TestRemovedRegistrationEndsItsGrantsAndGroups(t *testing.T) {
	e := hierarchy(t)
	e.UpsertGrant(grant("org", org, vcpu, quota.GrantBucket{Amount: 10}))
	e.UpsertGrant(group("team-data", 5, "quota.miloapis.com/team=data"))
	team := quota.GroupID("milo-system", "team-data")
	if got := e.GroupMembers(team); len(got) != 2 {
		t.Fatalf("the group selects %v, want web and api", got)
	}
	e.AddClaim(claim("waiting", 1, proj("web"), quota.Request{ResourceType: vcpu, Amount: 6}))
	e.Decide()
	if d, _ := e.Decision("waiting"); d.Outcome != quota.QuotaExceeded {
		t.Fatalf("6 against the group's 5: %s %q", d.Outcome, d.Message)
	}
	e.RemoveRegistration("vcpu")
	if v, _ := e.GrantValidity("team-data"); v.Valid {
		t.Errorf("the group's grant is still valid: %+v", v)
	}
	if got := e.GroupMembers(team); got != nil {
		t.Errorf("a group whose registration is gone still selects %v", got)
	}
	e.Decide()
	if d, _ := e.Decision("waiting"); d.Outcome != quota.ValidationFailed || !strings.Contains(d.Message, "is not registered") {
		t.Errorf("the waiting claim after its registration went: %s %q, want ValidationFailed, not registered", d.Outcome, d.Message)
	}
}
