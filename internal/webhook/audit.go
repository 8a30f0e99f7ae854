package webhook

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/members"
)

// Finding is one disagreement between a member cluster and the quota
// plane's claims for it.
type Finding struct {
	// Check is "uncharged" (an object a policy charges has no claim) or
	// "orphan" (a claim whose object is not in the cluster).
	Check   string
	Message string
	Repair  string
}

// Audit compares a member cluster's objects with the quota plane's claims
// for it, reading only: an uncharged object is found by asking the quota
// plane what a dry-run create of it would charge. Claims younger than
// ReleaseAfter are left out (their objects may still be being stored).
func Audit(ctx context.Context, o *Options) ([]Finding, error) {
	if err := members.ValidateName(o.ClusterName); err != nil {
		return nil, fmt.Errorf("--cluster-name: %w", err)
	}
	w, err := newWebhook(ctx, o)
	if err != nil {
		return nil, err
	}
	policies := &quotav1alpha1.ClaimCreationPolicyList{}
	if err := w.quota.List(ctx, policies); err != nil {
		return nil, fmt.Errorf("listing the quota plane's ClaimCreationPolicies: %w", err)
	}
	w.policies = &policySet{list: func() []quotav1alpha1.ClaimCreationPolicy { return policies.Items }}
	claims := &quotav1alpha1.ResourceClaimList{}
	if err := w.quota.List(ctx, claims, client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(labels.Set{members.Label: o.ClusterName})}); err != nil {
		return nil, fmt.Errorf("listing the quota plane's claims for cluster %s: %w", o.ClusterName, err)
	}
	objects := map[string]memberObject{}
	for _, kind := range w.policies.kinds() {
		m, err := w.mapper.RESTMapping(kind.GroupKind(), kind.Version)
		if err != nil {
			continue // not served here: nothing of it to charge
		}
		list, err := w.memberMetadata.Resource(m.Resource).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing %s in cluster %s: %w", m.Resource.GroupResource(), o.ClusterName, err)
		}
		for _, item := range list.Items {
			if !w.excluded(item.Namespace) {
				objects[string(item.UID)] = memberObject{gvr: m.Resource, kind: kind, namespace: item.Namespace, name: item.Name, uid: string(item.UID)}
			}
		}
	}
	cmp := compare(objects, claims.Items, time.Now(), o.ReleaseAfter)
	var out []Finding
	for _, obj := range cmp.unclaimed {
		resp, err := w.reviewExisting(ctx, obj, true)
		if err != nil {
			return nil, fmt.Errorf("asking the quota plane what %s would be charged: %w", obj, err)
		}
		switch {
		case !resp.Allowed && resp.Result != nil:
			out = append(out, Finding{Check: "uncharged", Message: fmt.Sprintf("%s has no claim, and charging it would be refused: %s", obj, resp.Result.Message),
				Repair: "free quota or raise the grant, then the webhook's reconcile charges it; or delete the object"})
		case strings.Contains(strings.Join(resp.Warnings, " "), "would charge"):
			out = append(out, Finding{Check: "uncharged", Message: fmt.Sprintf("%s has no claim, though %s", obj, strings.Join(resp.Warnings, "; ")),
				Repair: "the webhook's reconcile charges it within --reconcile-period; make sure quotaplane webhook runs in this cluster"})
		}
	}
	for _, c := range cmp.suspect {
		gone, err := w.objectGone(ctx, c)
		if err != nil {
			return nil, err
		}
		if gone {
			out = append(out, Finding{Check: "orphan", Message: fmt.Sprintf("claim %s/%s holds quota for %s, which is not in cluster %s", c.Namespace, c.Name, refText(c.Spec.ResourceRef), o.ClusterName),
				Repair: "the webhook's reconcile releases it within --reconcile-period; or delete the claim"})
		}
	}
	return out, nil
}

func refText(r *quotav1alpha1.ResourceRef) string {
	if r == nil {
		return "no object"
	}
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

// PrintFindings writes an audit's findings, one paragraph each.
func PrintFindings(out io.Writer, cluster string, fs []Finding) {
	if len(fs) == 0 {
		fmt.Fprintf(out, "cluster %s: every object the policies charge has its claim, and every claim its object\n", cluster)
		return
	}
	fmt.Fprintf(out, "cluster %s: %d discrepancies\n", cluster, len(fs))
	for _, f := range fs {
		fmt.Fprintf(out, "  %s: %s\n    repair: %s\n", f.Check, f.Message, f.Repair)
	}
}
