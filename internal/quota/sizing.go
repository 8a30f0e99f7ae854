package quota

// SizingLevel is one level an amount would be drawn from, as a QuotaReview
// answers it: the consumer charged, an ancestor, or a group.
type SizingLevel struct {
	Consumer  ConsumerID
	Limit     int64
	Unlimited bool // no grant at this level: it limits nothing
	Allocated int64
}

// Sizing is how a level stands with amount more: Needed is the limit it
// must have (what is allocated plus amount), Short how far its limit is
// below that (0 when it fits or the level limits nothing).
type Sizing struct {
	SizingLevel
	Needed int64
	Short  int64
}

// Size says, for each level, what limit taking amount more needs: what the
// request form of the portal proposes to ask for. A level whose limit is
// already enough is not short; every short level must be raised for the
// amount to fit.
func Size(levels []SizingLevel, amount int64) []Sizing {
	out := make([]Sizing, len(levels))
	for i, l := range levels {
		s := Sizing{SizingLevel: l, Needed: l.Allocated + amount}
		if !l.Unlimited && s.Needed > l.Limit {
			s.Short = s.Needed - l.Limit
		}
		out[i] = s
	}
	return out
}
