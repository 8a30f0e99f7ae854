package existing

import "github.com/quotaplane/quotaplane/internal/policy/claims" // want `imports the claim renderer`

func render() string { return claims.NewClaim() }
