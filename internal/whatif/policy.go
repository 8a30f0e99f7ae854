package whatif

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/pkg/client/clientset/versioned"
)

// ReadPolicy reads the one ClaimCreationPolicy of a file ("-" is stdin).
func ReadPolicy(path string, stdin io.Reader) (*quotav1alpha1.ClaimCreationPolicy, error) {
	objs, _, err := Read([]string{path}, stdin)
	if err != nil {
		return nil, err
	}
	var found []*quotav1alpha1.ClaimCreationPolicy
	for _, u := range objs {
		if u.GetKind() != "ClaimCreationPolicy" || u.GroupVersionKind().Group != quotav1alpha1.GroupName {
			continue
		}
		cp := &quotav1alpha1.ClaimCreationPolicy{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, cp, true); err != nil {
			return nil, fmt.Errorf("%s: ClaimCreationPolicy %s: %w", path, u.GetName(), err)
		}
		found = append(found, cp)
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("%s holds %d ClaimCreationPolicies (apiVersion %s); --policy previews exactly one", path, len(found), quotav1alpha1.SchemeGroupVersion)
	}
	return found[0], nil
}

// PreviewPolicy asks the server what the policy would do to the objects
// that exist if it came into force.
func PreviewPolicy(ctx context.Context, c versioned.Interface, cp *quotav1alpha1.ClaimCreationPolicy) (*quotav1alpha1.QuotaReview, error) {
	r := &quotav1alpha1.QuotaReview{Spec: quotav1alpha1.QuotaReviewSpec{Policy: &quotav1alpha1.PolicyPreview{Name: cp.Name, Spec: cp.Spec}}}
	got, err := c.QuotaV1alpha1().QuotaReviews().Create(ctx, r, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("previewing ClaimCreationPolicy %s: %w", cp.Name, err)
	}
	return got, nil
}

// PrintPolicyTable writes, for people, every consumer the policy would
// charge with its usage against its limit now and after, the objects it
// would refuse or cannot evaluate, and the verdict; amounts are written as
// refusals write them (Units).
func PrintPolicyTable(w io.Writer, r *quotav1alpha1.QuotaReview, units Units) error {
	p := r.Status.PolicyImpact
	if p == nil {
		return fmt.Errorf("the server answered no policy preview")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONSUMER\tRESOURCE TYPE\tLIMIT\tALLOCATED\tAFTER\tOBJECTS\tWOULD REFUSE\tOVER")
	for _, c := range p.Consumers {
		over := "-"
		if c.AllocatedAfter > c.Limit && c.AllocatedAfter > c.Allocated {
			over = units.Change(c.ResourceType, c.AllocatedAfter-c.Limit)
		}
		rt := c.ResourceType
		if c.Dimensions != "" {
			rt += " {" + c.Dimensions + "}"
		}
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", c.ConsumerRef.Kind, c.ConsumerRef.Name, rt,
			units.Amount(c.ResourceType, c.Limit), units.Amount(c.ResourceType, c.Allocated), units.Amount(c.ResourceType, c.AllocatedAfter), c.Objects, c.WouldRefuse, over)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, o := range p.Refused {
		fmt.Fprintf(w, "would refuse: %s\n", o)
	}
	for _, o := range p.NotCharged {
		fmt.Fprintf(w, "cannot evaluate or charge: %s\n", o)
	}
	for _, e := range p.Summary.EvaluationErrors {
		fmt.Fprintf(w, "evaluation error at %s (%d objects, for example %s): %s\n", e.FieldRef, e.Count, e.Example, e.Message)
	}
	s := p.Summary
	if r.Status.Fits {
		fmt.Fprintf(w, "FITS: %s\n", s.Message)
	} else {
		fmt.Fprintf(w, "DOES NOT FIT: %s\n", s.Message)
	}
	return nil
}
