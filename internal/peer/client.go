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

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/admit"
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
	tr := &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS13},
		MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second, ForceAttemptHTTP2: true}
	return &Client{Leader: leader, HTTP: &http.Client{Transport: tr}}, nil
}

var _ admit.Forwarder = &Client{}

// DecideCreate asks the leader for the decision on a create's claims. It
// returns what the leader's own admission would get; ErrNotLeader (wrapped
// with why) when no leader answers before ctx ends.
func (c *Client) DecideCreate(ctx context.Context, claims []*quotav1alpha1.ResourceClaim, dryRun bool) (admit.AdmitResult, error) {
	body, err := json.Marshal(&CreateRequest{Claims: claims, DryRun: dryRun})
	if err != nil {
		return admit.AdmitResult{}, err
	}
	var last error
	for {
		addr, err := c.Leader.Address(ctx)
		if err == nil {
			var resp CreateResponse
			if err = c.post(ctx, addr, CreatePath, body, &resp); err == nil {
				if resp.Error == nil {
					return resp.Result, nil
				}
				if err = resp.Error.err(); !errors.Is(err, admit.ErrNotLeader) {
					return resp.Result, err
				}
			}
			c.Leader.Forget()
		}
		last = err
		select {
		case <-ctx.Done():
			return admit.AdmitResult{}, fmt.Errorf("%w: no leading replica answered (%v)", admit.ErrNotLeader, last)
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
	}
	return errors.New(e.Message)
}
