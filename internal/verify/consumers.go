package verify

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// missingConsumer reports, for a bucket the engine gives but that is not
// stored, whether its consumer is an Organization or a Project that does
// not exist: its bucket's namespace does not either, so no new engine term
// can write it. That is not a bucket to repair but a grant to fix, which
// only a person can: the grant names the wrong consumer (a typo), or one not
// created yet, or one deleted. Reported once per consumer.
func (v *verifier) missingConsumer(s *reading, r *Report, id quota.BucketID, reported map[quota.ConsumerID]bool) bool {
	c := id.Consumer
	if c.APIGroup != rmv1alpha1.GroupName {
		return false
	}
	names, listed := s.consumers[c.Kind]
	if !listed || names[c.Name] {
		return false
	}
	if reported[c] {
		return true
	}
	reported[c] = true
	grants := s.grantsOf[c]
	slices.Sort(grants)
	problem := fmt.Sprintf("there is no %s %s", c.Kind, c.Name)
	if near := quota.Nearest(c.Name, slices.Collect(maps.Keys(names))); near != "" {
		problem += fmt.Sprintf(" (did you mean %s?)", near)
	}
	what := "claims charge it"
	if len(grants) > 0 {
		what = "ResourceGrant " + strings.Join(grants, ", ResourceGrant ") + " name it as the consumer"
	}
	r.Add(Discrepancy{Check: CheckConsumerMissing, ID: string(CheckConsumerMissing) + "/" + c.String(),
		Problem: fmt.Sprintf("%s, yet %s: its buckets (%s first) cannot be stored, and the limit applies to nothing", problem, what, describeBucket(id)),
		Repair: fmt.Sprintf("correct the grant's spec.consumerRef.name (kubectl edit resourcegrant), create the %s, or delete the grant; "+
			"a person must choose, so quotaplane verify --repair leaves it", c.Kind)})
	return true
}
