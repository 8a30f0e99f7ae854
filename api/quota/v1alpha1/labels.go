package v1alpha1

const (
	// BudgetLabel marks a ResourceGrant an organization's owners wrote for
	// one of its projects: its value is the organization, whose delegable
	// budget the grant draws from. Admission sets it on every grant a
	// non-platform user writes in an organization's namespace; it cannot be
	// removed by them.
	BudgetLabel = "quota.miloapis.com/budget-of"

	// DefaultReservedLabelPrefix is the label prefix only the platform may
	// set on consumers (Organizations and Projects) and the only prefix
	// group grants select on.
	DefaultReservedLabelPrefix = "quota.miloapis.com/"
)
