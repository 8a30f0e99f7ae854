package peer

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"k8s.io/klog/v2"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/peer/wire"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/server/pki"
)

// attemptTimeout bounds one call to the leader: a call that times out is
// made again (to the same leader, or a new one) with the same claims, which
// the leader answers with its first grant (admit's grantedBeforeLocked).
const attemptTimeout = 3 * time.Second

// Client is the route.Forwarder of a replica: it asks the leader it finds.
type Client struct {
	Leader *Resolver
	HTTP   *http.Client

	// versions is the message version each leader's address answered in,
	// when it is not wire.Version: a leader one version behind, during a
	// rolling upgrade.
	versions sync.Map // address → int
}

// NewClient is a Client presenting this replica's peer certificate and
// trusting only the peer CA.
func NewClient(f pki.Files, leader *Resolver) (*Client, error) {
	pool, cert, err := load(f)
	if err != nil {
		return nil, err
	}
	// The leader is verified as a replica (the peer CA, the replicas' name),
	// not as the address it advertises, which its certificate need not name.
	tr := &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: pki.PeerServerName, MinVersion: tls.VersionTLS13},
		MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second, ForceAttemptHTTP2: true}
	return &Client{Leader: leader, HTTP: &http.Client{Transport: tr}}, nil
}

var _ route.Forwarder = &Client{}

// DecideCreate asks the leader for the decision on a create's claims. It
// returns what the leader's own admission would get; ErrNotLeader (wrapped
// with why) when no leader answers before ctx ends.
func (c *Client) DecideCreate(ctx context.Context, session string, claims []*quotav1alpha1.ResourceClaim, dryRun bool) (route.AdmitResult, bool, error) {
	resp, err := c.ask(ctx, CreatePath, &wire.CreateRequest{Session: session, Claims: claims, DryRun: dryRun})
	return fromCreateResult(resp.Create), resp.Held, err
}

// DecideUpdate asks the leader for the decision on an update's changes.
func (c *Client) DecideUpdate(ctx context.Context, session string, obj route.ObjectRef, changes []route.PolicyChange, dryRun bool) (route.UpdateResult, bool, error) {
	resp, err := c.ask(ctx, UpdatePath, &wire.UpdateRequest{Session: session, Object: toObjectRef(obj), Changes: toChanges(changes), DryRun: dryRun})
	return fromUpdateResult(resp.Update), resp.Held, err
}

// Review asks the leader to decide a review's steps.
func (c *Client) Review(ctx context.Context, steps []route.ReviewStep) (route.ReviewResult, error) {
	resp, err := c.ask(ctx, ReviewPath, &wire.ReviewRequest{Steps: toSteps(steps)})
	return fromReviewResult(resp.Review), err
}

// UndoEarlierAttempt asks the leader to undo what the session decided
// before for the object.
func (c *Client) UndoEarlierAttempt(ctx context.Context, session, objectUID string) error {
	_, err := c.ask(ctx, UndoPath, &wire.UndoRequest{Session: session, ObjectUID: objectUID})
	return err
}

// DecideBudget asks the leader for the decision on a delegated grant.
func (c *Client) DecideBudget(ctx context.Context, session string, g *quotav1alpha1.ResourceGrant, dryRun bool) (quota.BudgetResult, bool, error) {
	resp, err := c.ask(ctx, BudgetPath, &wire.BudgetRequest{Session: session, Grant: g, DryRun: dryRun})
	return fromBudgetResult(resp.Budget), resp.Held, err
}

// notifyTimeout bounds the calls nobody waits for.
const notifyTimeout = 10 * time.Second

// Ended tells the leader, in the background, how a session's request ended:
// it settles the request's grants at once. Should the call not arrive, the
// leader settles them by looking the objects up (docs/replicas.md).
func (c *Client) Ended(session string, status int) {
	c.notify(EndedPath, &wire.EndedRequest{Session: session, Status: status})
}

// RecordRefusal records a refusal in the leader's decision history, in the
// background.
func (c *Client) RecordRefusal(r route.Refusal) {
	w := toRefusal(r)
	c.notify(RefusalPath, &w)
}

func (c *Client) notify(path string, req any) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
		defer cancel()
		if _, err := c.ask(ctx, path, req); err != nil {
			klog.V(2).Info("Telling the leading replica failed", "path", path, "err", err)
		}
	}()
}

// ask posts req to the leading replica until one answers (the same leader
// again after a timeout, or a new one), and turns its error back into the
// one its own admission would have got. A leader that does not speak this
// replica's message version is asked once more in the highest version both
// speak; with none, the call ends at once as ErrNotLeader: the client is
// told to retry, and nothing is decoded in a version it was not written in.
func (c *Client) ask(ctx context.Context, path string, req any) (wire.Response, error) {
	// Versions 1 and 2 are the same body: only the header differs.
	body, err := json.Marshal(req)
	if err != nil {
		return wire.Response{}, err
	}
	var last error
	for {
		addr, err := c.Leader.Address(ctx)
		if errors.Is(err, ErrSelfLeads) {
			// This replica took the Lease: its own engine decides.
			return wire.Response{}, fmt.Errorf("%w (%v)", route.ErrLeadsHere, err)
		}
		if err == nil {
			var resp wire.Response
			version := c.versionFor(addr)
			err = c.post(ctx, addr, path, version, body, &resp)
			var refused *versionRefused
			if errors.As(err, &refused) {
				v, ok := wire.Shared(refused.spoken)
				if !ok || v == version {
					return wire.Response{}, fmt.Errorf("%w: %v", route.ErrNotLeader, err)
				}
				c.versions.Store(addr, v)
				err = c.post(ctx, addr, path, v, body, &resp)
				if errors.As(err, &refused) {
					return wire.Response{}, fmt.Errorf("%w: %v", route.ErrNotLeader, err)
				}
			}
			if err == nil {
				if resp.Error == nil {
					return resp, nil
				}
				if err = errOf(resp.Error); !errors.Is(err, route.ErrNotLeader) {
					return resp, err
				}
			}
			c.Leader.Forget()
		}
		last = err
		select {
		case <-ctx.Done():
			return wire.Response{}, fmt.Errorf("%w: no leading replica answered (%v)", route.ErrNotLeader, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// versionFor is the message version to write to the leader at addr.
func (c *Client) versionFor(addr string) int {
	if v, ok := c.versions.Load(addr); ok {
		return v.(int)
	}
	return wire.Version
}

// versionRefused is a leader's refusal of the version a call was written in;
// spoken lists the versions it speaks.
type versionRefused struct {
	addr, spoken, message string
}

func (e *versionRefused) Error() string {
	return fmt.Sprintf("the leading replica at %s refused the peer message version (it speaks %s): %s", e.addr, e.spoken, e.message)
}

func (c *Client) post(ctx context.Context, addr, path string, version int, body []byte, into any) error {
	actx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, "https://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	wire.Set(req.Header, version)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("calling the leading replica at %s: %w", addr, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if spoken := resp.Header.Get(wire.VersionsHeader); resp.StatusCode == http.StatusBadRequest && spoken != "" {
		var e wire.Error
		_ = json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&e)
		return &versionRefused{addr: addr, spoken: spoken, message: e.Message}
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("the leading replica at %s answered %s: %s", addr, resp.Status, bytes.TrimSpace(msg))
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

// errOf is the error the leader's own admission got.
func errOf(e *wire.Error) error {
	switch e.Kind {
	case wire.ErrorNameTaken:
		return &route.NameTakenError{Claim: e.Claim, Policy: e.Policy, By: e.By}
	case wire.ErrorNotLeader, wire.ErrorUnsupportedVersion:
		return fmt.Errorf("%w (%s)", route.ErrNotLeader, e.Message)
	case wire.ErrorBusy:
		return fmt.Errorf("%w (%s)", route.ErrBusy, e.Message)
	case wire.ErrorObjectBusy:
		return fmt.Errorf("%w (%s)", route.ErrObjectBusy, e.Message)
	}
	return errors.New(e.Message)
}
