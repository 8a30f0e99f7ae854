package verify

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/policy/governed"
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

// namespaceLabels reads a root namespace's labels once per run, as a
// policy's namespace selector matches them.
func (v *verifier) namespaceLabels(ctx context.Context, ns string) (labels.Set, error) {
	if set, ok := v.nsLabels[ns]; ok {
		return set, nil
	}
	m, err := v.metadata.Resource(corev1.SchemeGroupVersion.WithResource("namespaces")).Get(ctx, ns, metav1.GetOptions{})
	set, err := governed.ReadNamespaceLabels(ns, m, err)
	if err != nil {
		return nil, err
	}
	if v.nsLabels == nil {
		v.nsLabels = map[string]labels.Set{}
	}
	v.nsLabels[ns] = set
	return set, nil
}
