package peer

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/peer/wire"
	"github.com/quotaplane/quotaplane/internal/server/pki"
)

// messages are the samples as this replica writes them, by the name of their
// example under testdata/<version>/, with a fresh value of each message's
// type to decode an example into.
func messages(s sample) map[string][2]any {
	return map[string][2]any{
		"create-request":  {&wire.CreateRequest{Session: "s1", Claims: s.steps[0].Claims, DryRun: true}, &wire.CreateRequest{}},
		"update-request":  {&wire.UpdateRequest{Session: "s2", Object: toObjectRef(s.object), Changes: toChanges(s.changes), DryRun: true}, &wire.UpdateRequest{}},
		"budget-request":  {&wire.BudgetRequest{Session: "s3", Grant: s.grant, DryRun: true}, &wire.BudgetRequest{}},
		"review-request":  {&wire.ReviewRequest{Steps: toSteps(s.steps)}, &wire.ReviewRequest{}},
		"undo-request":    {&wire.UndoRequest{Session: "s4", ObjectUID: "obj-1"}, &wire.UndoRequest{}},
		"ended-request":   {&wire.EndedRequest{Session: "s5", Status: 201}, &wire.EndedRequest{}},
		"refusal":         {ptr.To(toRefusal(s.refusal)), &wire.Refusal{}},
		"create-response": {&wire.Response{Create: toCreateResult(s.create), Held: true}, &wire.Response{}},
		"update-response": {&wire.Response{Update: toUpdateResult(s.update), Held: true}, &wire.Response{}},
		"budget-response": {&wire.Response{Budget: toBudgetResult(s.budget), Held: true}, &wire.Response{}},
		"review-response": {&wire.Response{Review: toReviewResult(s.review)}, &wire.Response{}},
		"error-response":  {&wire.Response{Error: errorOf(s.nameTake)}, &wire.Response{}},
	}
}

// TestMessagesOfEveryVersionSpoken: the examples of version 1 (written by
// the replicas of issues 35 to 52, before the messages had types of their
// own) and of version 2 decode into this version's messages and back into
// the engine's values they were made from, every field intact; and this
// replica writes each message exactly as version 2's example. A change of
// encoding fails here: add a wire.Version, keep reading the one before, and
// add its examples (QUOTAPLANE_WRITE_WIRE_EXAMPLES=2 writes version 2's
// from this code).
func TestMessagesOfEveryVersionSpoken(t *testing.T) {
	s := samples()
	if v := os.Getenv("QUOTAPLANE_WRITE_WIRE_EXAMPLES"); v != "" {
		for name, m := range messages(s) {
			b, err := json.MarshalIndent(m[0], "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join("testdata", "v"+v, name+".json"), append(b, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, version := range []string{"v1", "v2"} {
		for name, m := range messages(s) {
			t.Run(version+"/"+name, func(t *testing.T) {
				example, err := os.ReadFile(filepath.Join("testdata", version, name+".json"))
				if err != nil {
					t.Fatal(err)
				}
				// Written by this replica: the same JSON as the example.
				ours, err := json.Marshal(m[0])
				if err != nil {
					t.Fatal(err)
				}
				var want, got any
				if err := json.Unmarshal(example, &want); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(ours, &got); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("this replica writes %s as\n%s\nnot as version %s's example\n%s", name, ours, version, example)
				}
				// Read by this replica: the engine's values it was made from.
				dec := json.NewDecoder(strings.NewReader(string(example)))
				dec.DisallowUnknownFields()
				if err := dec.Decode(m[1]); err != nil {
					t.Fatalf("version %s's %s does not decode: %v", version, name, err)
				}
				if back := engineValue(m[1]); back != nil && !reflect.DeepEqual(back, engineValue(m[0])) {
					t.Errorf("version %s's %s reads back as\n%#v\nwant\n%#v", version, name, back, engineValue(m[0]))
				}
			})
		}
	}
}

// engineValue is what this replica's engine gets from a message.
func engineValue(m any) any {
	switch m := m.(type) {
	case *wire.UpdateRequest:
		return []any{fromObjectRef(m.Object), fromChanges(m.Changes)}
	case *wire.ReviewRequest:
		return fromSteps(m.Steps)
	case *wire.Refusal:
		return fromRefusal(*m)
	case *wire.Response:
		return []any{fromCreateResult(m.Create), fromUpdateResult(m.Update), fromBudgetResult(m.Budget), fromReviewResult(m.Review), m.Error}
	}
	return m
}

// TestAMessageOfAnUnknownVersionIsRefusedUnread: the listener refuses a call
// in a version it does not speak before reading its body, saying which it
// speaks, and decides nothing; the version before its own is answered, in
// that version.
func TestAMessageOfAnUnknownVersionIsRefusedUnread(t *testing.T) {
	f, _, addr := replica(t, "127.0.0.1")
	hc := peerHTTP(t, f)
	post := func(version, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, "https://"+addr+CreatePath, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if version != "" {
			req.Header.Set(wire.Header, version)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	for _, v := range []string{"3", "0", "x"} {
		resp := post(v, `{"claims": "not version 2's create at all"}`)
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("version %q: answered %s; want 400", v, resp.Status)
		}
		if v != "3" {
			continue
		}
		var e wire.Error
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Fatal(err)
		}
		if resp.Header.Get(wire.VersionsHeader) != "2,1" || e.Kind != wire.ErrorUnsupportedVersion ||
			!strings.Contains(e.Message, "versions 2 and 1, not version 3") {
			t.Fatalf("version 3: %s %q, %+v; want UnsupportedVersion naming the versions spoken (2 and 1) and the one asked (3)", resp.Status, resp.Header.Get(wire.VersionsHeader), e)
		}
	}
	for v, header := range map[string]string{"": "", "1": "", "2": "2"} {
		resp := post(v, `{"session":"s","claims":[]}`)
		var r wire.Response
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("version %q: %s, %v", v, resp.Status, err)
		}
		if r.Error == nil || r.Error.Kind != wire.ErrorNotLeader || resp.Header.Get(wire.Header) != header {
			t.Fatalf("version %q: answered %+v with the header %q; want this non-leader's \"not the leader\", in version %q", v, r.Error, resp.Header.Get(wire.Header), header)
		}
	}
}

// TestALeaderOfAnotherVersion: a leader that speaks only the version before
// this replica's is asked again in it, once, and then in it from the start;
// a leader that speaks neither this version nor the one before ends the call
// at once as "not the leader" (the client is told to retry), long before
// its deadline, with the versions both sides speak in the error.
func TestALeaderOfAnotherVersion(t *testing.T) {
	f, err := pki.Ensure(t.TempDir(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var refused, answered atomic.Int32
	older := fakeLeader(t, f, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(wire.Header) != "" {
			refused.Add(1)
			w.Header().Set(wire.VersionsHeader, "1")
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(&wire.Error{Kind: wire.ErrorUnsupportedVersion, Message: "speaks 1"})
			return
		}
		answered.Add(1)
		_ = json.NewEncoder(w).Encode(&wire.Response{Create: &wire.CreateResult{Granted: true}})
	})
	c, err := NewClient(f, &Resolver{address: older, at: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		res, _, err := c.DecideCreate(t.Context(), "s", nil, false)
		if err != nil || !res.Granted {
			t.Fatalf("call %d to a leader of version 1: %+v, %v; want its answer", i, res, err)
		}
	}
	if refused.Load() != 1 || answered.Load() != 2 {
		t.Errorf("a leader of version 1: refused %d and answered %d calls; want the first refused once and both answered in version 1", refused.Load(), answered.Load())
	}

	var calls atomic.Int32
	newer := fakeLeader(t, f, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set(wire.VersionsHeader, "4,3")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(&wire.Error{Kind: wire.ErrorUnsupportedVersion, Message: "this replica speaks peer message versions 4 and 3, not version 2"})
	})
	c, err = NewClient(f, &Resolver{address: newer, at: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, _, err = c.DecideCreate(ctx, "s", nil, false)
	if !errors.Is(err, route.ErrNotLeader) || !strings.Contains(err.Error(), "4,3") || time.Since(start) > 5*time.Second {
		t.Fatalf("a leader two versions ahead: %v after %s; want \"not the leader\" (retry) at once, naming the versions it speaks", err, time.Since(start))
	}
	if calls.Load() != 1 {
		t.Errorf("a leader two versions ahead was called %d times; want once", calls.Load())
	}
}

// peerHTTP is an HTTP client presenting f's peer certificate.
func peerHTTP(t *testing.T, f pki.Files) *http.Client {
	t.Helper()
	c, err := NewClient(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.HTTP
}

// fakeLeader serves handler on the peer CA's TLS at a loopback address until
// the test ends, as a replica of another version would.
func fakeLeader(t *testing.T, f pki.Files, handler http.HandlerFunc) string {
	t.Helper()
	cfg, err := TLS(f)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: handler, TLSConfig: cfg, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = hs.Close() })
	return ln.Addr().String()
}
