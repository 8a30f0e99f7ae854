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
	"time"

	"k8s.io/klog/v2"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/admit"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/server/pki"
)

// attemptTimeout bounds one call to the leader: a call that times out is
// made again (to the same leader, or a new one) with the same claims, which
// the leader answers with its first grant (admit's grantedBeforeLocked).
const attemptTimeout = 3 * time.Second

// Client is the admit.Forwarder of a replica: it asks the leader it finds.
type Client struct {
	Leader *Resolver
	HTTP   *http.Client
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

var _ admit.Forwarder = &Client{}

// DecideCreate asks the leader for the decision on a create's claims. It
// returns what the leader's own admission would get; ErrNotLeader (wrapped
// with why) when no leader answers before ctx ends.
func (c *Client) DecideCreate(ctx context.Context, session string, claims []*quotav1alpha1.ResourceClaim, dryRun bool) (admit.AdmitResult, bool, error) {
	resp, err := c.ask(ctx, CreatePath, &CreateRequest{Session: session, Claims: claims, DryRun: dryRun})
	if resp.Create == nil {
		return admit.AdmitResult{}, resp.Held, err
	}
	return *resp.Create, resp.Held, err
}

// DecideUpdate asks the leader for the decision on an update's changes.
func (c *Client) DecideUpdate(ctx context.Context, session string, obj admit.ObjectRef, changes []admit.PolicyChange, dryRun bool) (admit.UpdateResult, bool, error) {
	resp, err := c.ask(ctx, UpdatePath, &UpdateRequest{Session: session, Object: obj, Changes: changes, DryRun: dryRun})
	return resp.Update.result(), resp.Held, err
}

// Review asks the leader to decide a review's steps.
func (c *Client) Review(ctx context.Context, steps []admit.ReviewStep) (admit.ReviewResult, error) {
	resp, err := c.ask(ctx, ReviewPath, &ReviewRequest{Steps: steps})
	if resp.Review == nil {
		return admit.ReviewResult{}, err
	}
	return *resp.Review, err
}

// UndoEarlierAttempt asks the leader to undo what the session decided
// before for the object.
func (c *Client) UndoEarlierAttempt(ctx context.Context, session, objectUID string) error {
	_, err := c.ask(ctx, UndoPath, &UndoRequest{Session: session, ObjectUID: objectUID})
	return err
}

// DecideBudget asks the leader for the decision on a delegated grant.
func (c *Client) DecideBudget(ctx context.Context, session string, g *quotav1alpha1.ResourceGrant, dryRun bool) (quota.BudgetResult, bool, error) {
	resp, err := c.ask(ctx, BudgetPath, &BudgetRequest{Session: session, Grant: g, DryRun: dryRun})
	if resp.Budget == nil {
		return quota.BudgetResult{}, resp.Held, err
	}
	return *resp.Budget, resp.Held, err
}

// notifyTimeout bounds the calls nobody waits for.
const notifyTimeout = 10 * time.Second

// Ended tells the leader, in the background, how a session's request ended:
// it settles the request's grants at once. Should the call not arrive, the
// leader settles them by looking the objects up (docs/replicas.md).
func (c *Client) Ended(session string, status int) {
	c.notify(EndedPath, &EndedRequest{Session: session, Status: status})
}

// RecordRefusal records a refusal in the leader's decision history, in the
// background.
func (c *Client) RecordRefusal(r admit.Refusal) {
	c.notify(RefusalPath, &r)
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
// one its own admission would have got.
func (c *Client) ask(ctx context.Context, path string, req any) (Response, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Response{}, err
	}
	var last error
	for {
		addr, err := c.Leader.Address(ctx)
		if errors.Is(err, ErrSelfLeads) {
			// This replica took the Lease: its own engine decides.
			return Response{}, fmt.Errorf("%w (%v)", admit.ErrLeadsHere, err)
		}
		if err == nil {
			var resp Response
			if err = c.post(ctx, addr, path, body, &resp); err == nil {
				if resp.Error == nil {
					return resp, nil
				}
				if err = resp.Error.err(); !errors.Is(err, admit.ErrNotLeader) {
					return resp, err
				}
			}
			c.Leader.Forget()
		}
		last = err
		select {
		case <-ctx.Done():
			return Response{}, fmt.Errorf("%w: no leading replica answered (%v)", admit.ErrNotLeader, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Client) post(ctx context.Context, addr, path string, body []byte, into any) error {
	actx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, "https://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("calling the leading replica at %s: %w", addr, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("the leading replica at %s answered %s: %s", addr, resp.Status, bytes.TrimSpace(msg))
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

// err is the error the leader's own admission got.
func (e *Error) err() error {
	switch e.Kind {
	case ErrorNameTaken:
		return &admit.NameTakenError{Claim: e.Claim, Policy: e.Policy, By: e.By}
	case ErrorNotLeader:
		return fmt.Errorf("%w (%s)", admit.ErrNotLeader, e.Message)
	case ErrorBusy:
		return fmt.Errorf("%w (%s)", admit.ErrBusy, e.Message)
	case ErrorObjectBusy:
		return fmt.Errorf("%w (%s)", admit.ErrObjectBusy, e.Message)
	}
	return errors.New(e.Message)
}
