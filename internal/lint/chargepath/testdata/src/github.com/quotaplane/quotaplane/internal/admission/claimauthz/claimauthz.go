package claimauthz

func AuthorizeClaim() error { return nil }
