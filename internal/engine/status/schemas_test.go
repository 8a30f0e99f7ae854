package status

import (
	"testing"
	"time"
)

// TestSchemaWaits: a new generation of a policy whose kind was just served
// is held back while its schema is looked for, up to schemaWaitTotal, an
// enforced one never; a kind not served is looked for less and less often;
// a known schema ends it all.
func TestSchemaWaits(t *testing.T) {
	var s schemaWaits
	held := 0
	for range 20 {
		wait, again := s.next("p", 1, SchemaPending, false)
		if again != schemaWaitStep {
			t.Fatalf("pending: judged again after %s, want %s", again, schemaWaitStep)
		}
		if wait {
			held++
		}
	}
	if want := int(schemaWaitTotal / schemaWaitStep); held != want {
		t.Errorf("held back %d times, want %d", held, want)
	}
	if wait, _ := s.next("p", 2, SchemaPending, true); wait {
		t.Error("an enforced generation was held back")
	}
	var agains []time.Duration
	for range 6 {
		_, again := s.next("q", 1, KindNotServed, false)
		agains = append(agains, again)
	}
	if agains[0] != rejudgeFirst || agains[1] != 2*rejudgeFirst || agains[5] != rejudgeMax {
		t.Errorf("a kind not served is judged again after %v", agains)
	}
	if wait, again := s.next("q", 1, SchemaKnown, false); wait || again != 0 {
		t.Errorf("a known schema: wait %v, again %s", wait, again)
	}
	if _, again := s.next("q", 1, KindNotServed, false); again != rejudgeFirst {
		t.Errorf("after the schema was known, backing off again starts at %s, not %s", again, rejudgeFirst)
	}
}
