package whatif

// Review is a function of this package, not the engine's.
func Review() error { return nil }

func use() error { return Review() }
