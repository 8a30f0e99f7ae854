package admit

// Term decides locally.
type Term struct{}

func (t *Term) Admit() error { return nil }
