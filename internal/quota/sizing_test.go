package quota

import "testing"

func TestSize(t *testing.T) {
	project := ConsumerID{Kind: "Project", Name: "web"}
	org := ConsumerID{Kind: "Organization", Name: "acme"}
	levels := []SizingLevel{{Consumer: project, Limit: 6, Allocated: 4}, {Consumer: org, Limit: 10, Allocated: 7}, {Consumer: ConsumerID{Kind: "Group"}, Unlimited: true, Allocated: 50}}
	for _, c := range []struct {
		amount                 int64
		projectShort, orgShort int64
	}{{2, 0, 0}, {3, 1, 0}, {5, 3, 2}, {0, 0, 0}} {
		got := Size(levels, c.amount)
		if got[0].Needed != 4+c.amount || got[0].Short != c.projectShort || got[1].Needed != 7+c.amount || got[1].Short != c.orgShort || got[2].Short != 0 {
			t.Errorf("%d more: %+v; want the project short %d, the organization %d, the unlimited group never", c.amount, got, c.projectShort, c.orgShort)
		}
	}
}
