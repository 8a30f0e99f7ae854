package policy

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Units tells what one base unit of a resource type is, as a Kubernetes
// quantity ("1Mi"), when its ResourceRegistration declares it
// (spec.baseUnitQuantity).
type Units func(resourceType string) (quantity string, ok bool)

// ParseAmount reads an amount written in a policy: a whole number of base
// units ("4096"), or a Kubernetes quantity ("4Gi", "500m") converted exactly
// to the base units the resource type's registration declares. An amount
// that is not a whole, positive number of base units is refused with the
// reason, never rounded.
func ParseAmount(s, resourceType string, units Units) (int64, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n <= 0 {
			return 0, fmt.Errorf("amount %q of %s must be positive", s, resourceType)
		}
		return n, nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("amount %q of %s is neither a whole number of base units nor a Kubernetes quantity (like 2Gi or 500m)", s, resourceType)
	}
	var base string
	ok := false
	if units != nil {
		base, ok = units(resourceType)
	}
	if !ok {
		return 0, fmt.Errorf("amount %q of %s is a quantity, but the ResourceRegistration of %s declares no spec.baseUnitQuantity, so it cannot be converted to base units: write the amount in base units, or declare what one base unit is (for example baseUnitQuantity: 1Mi)", s, resourceType, resourceType)
	}
	unit, err := resource.ParseQuantity(base)
	if err != nil || unit.Sign() <= 0 {
		return 0, fmt.Errorf("the ResourceRegistration of %s declares spec.baseUnitQuantity %q, which is not a positive quantity", resourceType, base)
	}
	n, exact := divide(q, unit)
	switch {
	case q.Sign() <= 0:
		return 0, fmt.Errorf("amount %q of %s must be positive", s, resourceType)
	case !exact:
		return 0, fmt.Errorf("amount %q of %s is not a whole number of base units (one base unit is %s); quota amounts are never rounded: write a multiple of %s", s, resourceType, unit.String(), unit.String())
	case !n.IsInt64() || n.Int64() > math.MaxInt64:
		return 0, fmt.Errorf("amount %q of %s is more base units than an amount can hold (%d)", s, resourceType, int64(math.MaxInt64))
	}
	return n.Int64(), nil
}

// renderedAmount reads the amount a claim template's {{ CEL }} renders for
// one object, as ParseAmount does, except that exactly zero ("0", "0Mi") is
// 0, whatever the resource type's units: the request charges nothing, and
// Evaluate leaves it out of the claim. A negative amount is refused.
func renderedAmount(s, resourceType string, units Units) (int64, error) {
	if q, err := resource.ParseQuantity(strings.TrimSpace(s)); err == nil {
		switch q.Sign() {
		case 0:
			return 0, nil
		case -1:
			return 0, fmt.Errorf("amount %q of %s is negative; a rendered amount is a whole number of base units, 0 (charging nothing) or more", s, resourceType)
		}
	}
	return ParseAmount(s, resourceType, units)
}

// divide is q/unit and whether it is a whole number, computed exactly.
func divide(q, unit resource.Quantity) (*big.Int, bool) {
	a, b := q.AsDec(), unit.AsDec()
	// a = A·10^-sa, b = B·10^-sb; bring both to the larger scale.
	av, bv := new(big.Int).Set(a.UnscaledBig()), new(big.Int).Set(b.UnscaledBig())
	sa, sb := int64(a.Scale()), int64(b.Scale())
	ten := big.NewInt(10)
	if sa < sb {
		av.Mul(av, new(big.Int).Exp(ten, big.NewInt(sb-sa), nil))
	} else if sb < sa {
		bv.Mul(bv, new(big.Int).Exp(ten, big.NewInt(sa-sb), nil))
	}
	quo, rem := new(big.Int).QuoRem(av, bv, new(big.Int))
	return quo, rem.Sign() == 0
}
