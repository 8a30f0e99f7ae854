package charge

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/policy"
	"github.com/quotaplane/quotaplane/internal/policy/claims"
	"github.com/quotaplane/quotaplane/internal/policy/governed"
)

// ClaimSource is what a rendered claim is made from: the policy version,
// the object and where it is (policy/claims).
type ClaimSource = claims.ClaimSource

// Validator checks a rendered claim as the API server would check it.
type Validator = claims.ClaimValidator

// NewValidator is a Validator.
func NewValidator() (*Validator, error) { return claims.NewClaimValidator() }

// Problem is why a policy's rendering cannot charge an object.
type Problem int

const (
	// NoConsumer: the template names no consumerRef, and the object is at
	// the root, which belongs to no project.
	NoConsumer Problem = iota + 1
	// PlaneConsumer: the consumer is of a kind each control plane stores
	// for itself (governed.PlaneConsumer); Err says why.
	PlaneConsumer
	// Invalid: the API server would refuse the claim; Errs say why.
	Invalid
)

// RenderResult is the render step's outcome for one policy and object.
type RenderResult struct {
	Claim   *quotav1alpha1.ResourceClaim
	Problem Problem
	// Err is a PlaneConsumer problem's cause; Errs an Invalid one's.
	Err  error
	Errs field.ErrorList
}

// RenderClaim is the render step of doc.go for one policy version's
// rendering r of an object: the claim as every way in makes it, checked in
// the same order — a consumer named, a consumer the plane may charge, a
// claim the API server would accept. Each caller words a Problem for its
// own answer (admission's refusal, the existing-object charger's status).
func RenderClaim(src ClaimSource, r *policy.Rendered, v *Validator) RenderResult {
	c := claims.NewClaim(src, r)
	if c.Spec.ConsumerRef.Kind == "" {
		return RenderResult{Claim: c, Problem: NoConsumer}
	}
	if src.Plane != nil {
		if err := governed.PlaneConsumer(*src.Plane, c.Spec.ConsumerRef); err != nil {
			return RenderResult{Claim: c, Problem: PlaneConsumer, Err: err}
		}
	}
	if errs := v.Validate(c); len(errs) > 0 {
		return RenderResult{Claim: c, Problem: Invalid, Errs: errs}
	}
	return RenderResult{Claim: c}
}
