package claims

func NewClaim() string { return "" }
