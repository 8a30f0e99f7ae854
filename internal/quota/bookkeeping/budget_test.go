package bookkeeping

import (
	"math"
	"strings"
	"testing"

	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/quota/quotatest"
)

// vcpuBooks are books where vcpu is charged to Projects and, a level up,
// to their Organizations, whose limit is the budget of its projects'
// delegated grants.
func vcpuBooks() *Books {
	bk := New()
	bk.UpsertRegistration(registration("vcpu", quotatest.VCPU, quotatest.ProjectKind(), quotatest.OrgKind()))
	return bk
}

func TestBudgetBindsDelegatedGrants(t *testing.T) {
	bk, org := vcpuBooks(), quotatest.Org()
	bk.UpsertGrant(grantOf("org", org, quotatest.VCPU, quota.GrantBucket{Amount: 10}))
	delegate := func(uid, p string, amount int64) quota.Grant {
		g := grantOf(uid, quotatest.Project(p), quotatest.VCPU, quota.GrantBucket{Amount: amount})
		g.Namespace, g.Budget = "organization-acme", &org
		return g
	}
	if r := bk.CheckBudget(delegate("d1", "web", 6)); !r.OK {
		t.Fatalf("6 of 10 refused: %s", r.Message)
	}
	bk.HoldBudget(delegate("d1", "web", 6))
	r := bk.CheckBudget(delegate("d2", "api", 5))
	if r.OK || r.Left != 4 || !strings.Contains(r.Message, "only 4 of it is left") {
		t.Fatalf("5 with 4 left: %+v", r)
	}
	// The platform's grants are outside the budget.
	if r := bk.CheckBudget(grantOf("p", quotatest.Project("api"), quotatest.VCPU, quota.GrantBucket{Amount: 1000})); !r.OK {
		t.Fatalf("a platform grant was checked against the budget: %s", r.Message)
	}
	// Stored, the hold settles into the grant; lowering is always allowed.
	bk.UpsertGrant(delegate("d1", "web", 6))
	if bk.BudgetHolds() != 0 {
		t.Fatalf("the stored grant did not settle its hold")
	}
	bk.UpsertGrant(grantOf("org", org, quotatest.VCPU, quota.GrantBucket{Amount: 2}))
	if r := bk.CheckBudget(delegate("d1", "web", 3)); !r.OK {
		t.Fatalf("lowering a grant over a lowered budget was refused: %s", r.Message)
	}
}

func TestBudgetSumsSaturate(t *testing.T) {
	bk, org := vcpuBooks(), quotatest.Org()
	bk.UpsertGrant(grantOf("org1", org, quotatest.VCPU, quota.GrantBucket{Amount: math.MaxInt64}))
	bk.UpsertGrant(grantOf("org2", org, quotatest.VCPU, quota.GrantBucket{Amount: math.MaxInt64}))
	big := func(uid, p string, amounts ...int64) quota.Grant {
		var bs []quota.GrantBucket
		for _, a := range amounts {
			bs = append(bs, quota.GrantBucket{Amount: a})
		}
		g := grantOf(uid, quotatest.Project(p), quotatest.VCPU, bs...)
		g.Namespace, g.Budget = "organization-acme", &org
		return g
	}
	bk.UpsertGrant(big("d1", "web", math.MaxInt64, math.MaxInt64))
	r := bk.CheckBudget(big("d2", "api", 1))
	if r.OK || r.Limit != math.MaxInt64 || r.Given != math.MaxInt64 || r.Left != 0 {
		t.Fatalf("a budget given in full accepted more, or wrapped: %+v", r)
	}
}
