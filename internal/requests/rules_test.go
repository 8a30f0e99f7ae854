package requests

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestApprovingRuleLeavesTheCallersRules: the first approving rule is found
// by name, and the caller's list keeps its order.
func TestApprovingRuleLeavesTheCallersRules(t *testing.T) {
	rule := func(name, expr string) compiledRule {
		prog, err := Compile(expr)
		if err != nil {
			t.Fatal(err)
		}
		return compiledRule{name: name, prog: prog}
	}
	rules := []compiledRule{rule("c-approves", "true"), rule("a-refuses", "false"), rule("b-approves", "usage.available > 0")}
	names := func() []string {
		var out []string
		for _, r := range rules {
			out = append(out, r.name)
		}
		return out
	}
	before := names()
	got, errs := approvingRule(rules, "example.com/vcpus", ruleInput{usage: map[string]int64{"available": 1}})
	if got != "b-approves" || len(errs) != 0 {
		t.Errorf("approvingRule() = %q, %v; want b-approves, the first by name that approves", got, errs)
	}
	if diff := cmp.Diff(before, names()); diff != "" {
		t.Errorf("the caller's rules were reordered (-before +after):\n%s", diff)
	}
}
