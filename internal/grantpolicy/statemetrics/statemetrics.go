package statemetrics

import (
	"sort"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/metricstext"
)

const componentLabel = "quota_system"

var (
	infoFamily = metricstext.Family{Name: "milo_quota_grant_policy_info",
		Help: "GrantCreationPolicy metadata and target configuration; always 1."}
	conditionFamily = metricstext.Family{Name: "milo_quota_grant_policy_status_condition",
		Help: "GrantCreationPolicy conditions: 1 for the status the condition has, 0 for the others."}
	enabledFamily = metricstext.Family{Name: "milo_quota_grant_policy_enabled",
		Help: "1 when the GrantCreationPolicy is enabled, 0 when disabled."}
	observedFamily = metricstext.Family{Name: "milo_quota_grant_policy_observed_generation",
		Help: "Generation of the policy the grant engine last reconciled."}
	currentFamily = metricstext.Family{Name: "milo_quota_grant_policy_current_generation",
		Help: "Generation of the policy's specification."}
)

// Writer writes the GrantCreationPolicy families of policies (the cache of
// the term this replica leads): the grant engine publishes it on /metrics
// for its term (observe.Exporter.Publish).
func Writer(policies cache.Store) func(*metricstext.Writer) {
	return func(e *metricstext.Writer) { write(e, policies) }
}

func write(e *metricstext.Writer, store cache.Store) {
	var policies []*quotav1alpha1.GrantCreationPolicy
	for _, obj := range store.List() {
		if p, ok := obj.(*quotav1alpha1.GrantCreationPolicy); ok {
			policies = append(policies, p)
		}
	}
	sort.Slice(policies, func(i, j int) bool { return policies[i].Name < policies[j].Name })
	var b []byte
	e.Header(infoFamily)
	for _, p := range policies {
		var parent quotav1alpha1.ParentContext
		if pc := p.Spec.Target.ParentContext; pc != nil {
			parent = *pc
		}
		tr := p.Spec.Trigger.Resource
		b = metricstext.LabelSet(b[:0], "component", componentLabel, "uid", string(p.UID), "name", p.Name,
			"trigger_api_version", tr.APIVersion, "trigger_kind", tr.Kind,
			"parent_context_api_group", parent.APIGroup, "parent_context_kind", parent.Kind, "enabled", strconv.FormatBool(!p.Spec.Disabled))
		e.Sample(infoFamily.Name, b, 1)
	}
	e.Header(conditionFamily)
	for _, p := range policies {
		for _, c := range p.Status.Conditions {
			for _, st := range []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown} {
				v := 0.0
				if c.Status == st {
					v = 1
				}
				b = metricstext.LabelSet(b[:0], "component", componentLabel, "name", p.Name, "type", c.Type, "status", string(st))
				e.Sample(conditionFamily.Name, b, v)
			}
		}
	}
	for _, f := range []struct {
		metricstext.Family
		value func(*quotav1alpha1.GrantCreationPolicy) float64
	}{
		{enabledFamily, func(p *quotav1alpha1.GrantCreationPolicy) float64 {
			if p.Spec.Disabled {
				return 0
			}
			return 1
		}},
		{observedFamily, func(p *quotav1alpha1.GrantCreationPolicy) float64 { return float64(p.Status.ObservedGeneration) }},
		{currentFamily, func(p *quotav1alpha1.GrantCreationPolicy) float64 { return float64(p.Generation) }},
	} {
		e.Header(f.Family)
		for _, p := range policies {
			b = metricstext.LabelSet(b[:0], "component", componentLabel, "name", p.Name)
			e.Sample(f.Name, b, f.value(p))
		}
	}
}
