package status

import (
	"sync"
	"time"
)

// SchemaState says what is known of a trigger kind's schema.
type SchemaState int

const (
	// SchemaKnown: the schemas of the kind's served versions were read.
	SchemaKnown SchemaState = iota
	// SchemaPending: the kind is served but its schema cannot be read yet
	// (a CRD just installed is in the OpenAPI documents a few seconds
	// after it is served).
	SchemaPending
	// KindNotServed: the API server does not serve the kind (yet); no
	// object of it can be created until it does.
	KindNotServed
)

// How long a policy waits for the schema of a kind just served before it is
// judged without it, and how often a policy judged without a schema is
// judged again.
const (
	schemaWaitStep  = 1500 * time.Millisecond
	schemaWaitTotal = 10 * time.Second
	// schemaPendingMax: a schema not readable after this long is looked
	// for less often.
	schemaPendingMax = time.Minute
	rejudgeFirst     = 5 * time.Second
	rejudgeMax       = time.Minute
)

// schemaWaits remembers, per policy, how long its generation has waited for
// its trigger kind's schema and how often it was judged without it.
type schemaWaits struct {
	mu sync.Mutex
	m  map[string]*schemaWait
}

type schemaWait struct {
	generation int64
	waited     time.Duration
	rejudge    time.Duration
}

// next decides for one judging of a policy: wait is true when it is to be
// held back (Ready=False) because its kind was just served and its schema
// is not readable yet (never for a generation already enforced, or a
// disabled policy); again is when to judge it once more (0: not needed).
func (s *schemaWaits) next(name string, generation int64, state SchemaState, settled bool) (wait bool, again time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if state == SchemaKnown {
		delete(s.m, name)
		return false, 0
	}
	if s.m == nil {
		s.m = map[string]*schemaWait{}
	}
	w := s.m[name]
	if w == nil || w.generation != generation {
		w = &schemaWait{generation: generation, rejudge: rejudgeFirst}
		s.m[name] = w
	}
	if state == SchemaPending && w.waited < schemaPendingMax {
		// A kind just served: its schema is looked for often. A generation
		// not yet enforced is held back meanwhile, for a while.
		w.waited += schemaWaitStep
		return !settled && w.waited <= schemaWaitTotal, schemaWaitStep
	}
	// Judged without the schema: judged again, less and less often, so
	// that a kind installed later has its fields checked.
	again = w.rejudge
	w.rejudge = min(2*w.rejudge, rejudgeMax)
	return false, again
}

func (s *schemaWaits) forget(name string) {
	s.mu.Lock()
	delete(s.m, name)
	s.mu.Unlock()
}
