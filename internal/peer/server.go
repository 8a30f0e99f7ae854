package peer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"time"

	"k8s.io/klog/v2"

	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/peer/wire"
	"github.com/quotaplane/quotaplane/internal/server/pki"
)

// maxBody bounds a request: a create's rendered claims, or a review's
// (1,000 objects' claims and changes).
const maxBody = 32 << 20

// Server answers the other replicas' requests with this replica's engine.
type Server struct {
	Handle *route.Handle
}

// ServeHTTP answers a peer, and refuses anyone else.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !fromPeer(r) {
		http.Error(w, "only quotaplane serve replicas (a client certificate of the peer CA with Organization "+pki.PeerGroup+") may call this listener", http.StatusForbidden)
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "only POST is served", http.StatusMethodNotAllowed)
		return
	}
	version, err := wire.Of(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !wire.Speaks(version) {
		// Refused before the body is read: a message of another version is
		// never decoded as one of ours.
		w.Header().Set(wire.VersionsHeader, wire.Spoken())
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(wire.Unsupported(version))
		return
	}
	switch r.URL.Path {
	case CreatePath:
		var req wire.CreateRequest
		serve(w, r, version, &req, func(ctx context.Context) wire.Response {
			ctx = s.Handle.Session(ctx, req.Session)
			res, err := s.Handle.DecideCreate(ctx, req.Claims, req.DryRun)
			return wire.Response{Create: toCreateResult(res), Held: route.Held(ctx), Error: errorOf(err)}
		})
	case UpdatePath:
		var req wire.UpdateRequest
		serve(w, r, version, &req, func(ctx context.Context) wire.Response {
			ctx = s.Handle.Session(ctx, req.Session)
			res, err := s.Handle.DecideUpdate(ctx, fromObjectRef(req.Object), fromChanges(req.Changes), req.DryRun)
			return wire.Response{Update: toUpdateResult(res), Held: route.Held(ctx), Error: errorOf(err)}
		})
	case BudgetPath:
		var req wire.BudgetRequest
		serve(w, r, version, &req, func(ctx context.Context) wire.Response {
			ctx = s.Handle.Session(ctx, req.Session)
			res, err := s.Handle.DecideBudget(ctx, req.Grant, req.DryRun)
			return wire.Response{Budget: toBudgetResult(res), Held: route.Held(ctx), Error: errorOf(err)}
		})
	case ReviewPath:
		var req wire.ReviewRequest
		serve(w, r, version, &req, func(ctx context.Context) wire.Response {
			// Decided here or refused, never forwarded again: during a
			// failover a review must not bounce between replicas.
			ctx = s.Handle.Session(ctx, "")
			res, err := s.Handle.Review(ctx, fromSteps(req.Steps))
			return wire.Response{Review: toReviewResult(res), Error: errorOf(err)}
		})
	case UndoPath:
		var req wire.UndoRequest
		serve(w, r, version, &req, func(ctx context.Context) wire.Response {
			ctx = s.Handle.Session(ctx, req.Session)
			err := s.Handle.UndoEarlierAttempt(ctx, req.ObjectUID)
			return wire.Response{Held: route.Held(ctx), Error: errorOf(err)}
		})
	case EndedPath:
		var req wire.EndedRequest
		serve(w, r, version, &req, func(context.Context) wire.Response {
			s.Handle.SessionEnded(req.Session, req.Status)
			return wire.Response{}
		})
	case RefusalPath:
		var req wire.Refusal
		serve(w, r, version, &req, func(context.Context) wire.Response {
			s.Handle.RecordForwardedRefusal(fromRefusal(req))
			return wire.Response{}
		})
	default:
		http.NotFound(w, r)
	}
}

// serve reads a request into req, and answers what do returns, in the
// request's version.
func serve(w http.ResponseWriter, r *http.Request, version int, req any, do func(context.Context) wire.Response) {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(req); err != nil {
		http.Error(w, fmt.Sprintf("reading the request: %v", err), http.StatusBadRequest)
		return
	}
	resp := do(r.Context())
	wire.Set(w.Header(), version)
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(&resp); err != nil {
		klog.FromContext(r.Context()).V(2).Info("Answering a peer failed", "err", err)
	}
}

// fromPeer reports whether r came with a client certificate the peer CA
// verified and that names the replicas' group.
func fromPeer(r *http.Request) bool {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return false
	}
	return slices.Contains(r.TLS.VerifiedChains[0][0].Subject.Organization, pki.PeerGroup)
}

// errorOf is err as a peer answer, nil for none.
func errorOf(err error) *wire.Error {
	var taken *route.NameTakenError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &taken):
		return &wire.Error{Kind: wire.ErrorNameTaken, Message: err.Error(), Claim: taken.Claim, Policy: taken.Policy, By: taken.By}
	case errors.Is(err, route.ErrNotLeader):
		return &wire.Error{Kind: wire.ErrorNotLeader, Message: err.Error()}
	case errors.Is(err, route.ErrBusy):
		return &wire.Error{Kind: wire.ErrorBusy, Message: err.Error()}
	case errors.Is(err, route.ErrObjectBusy):
		return &wire.Error{Kind: wire.ErrorObjectBusy, Message: err.Error()}
	}
	return &wire.Error{Kind: wire.ErrorOther, Message: err.Error()}
}

// TLS is the peer listener's configuration: this replica's peer
// certificate, and client certificates of the peer CA required.
func TLS(f pki.Files) (*tls.Config, error) {
	pool, cert, err := load(f)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool,
		MinVersion: tls.VersionTLS13}, nil
}

func load(f pki.Files) (*x509.CertPool, tls.Certificate, error) {
	caPEM, err := os.ReadFile(f.PeerCACert)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("reading the peer CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, tls.Certificate{}, fmt.Errorf("the peer CA %s holds no certificate", f.PeerCACert)
	}
	cert, err := tls.LoadX509KeyPair(f.PeerCert, f.PeerKey)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("reading this replica's peer certificate: %w", err)
	}
	return pool, cert, nil
}

// Listen serves s on addr until ctx is done; it returns the address it
// listens on.
func Listen(ctx context.Context, addr string, cfg *tls.Config, s *Server) (net.Addr, error) {
	ln, err := tls.Listen("tcp", addr, cfg)
	if err != nil {
		return nil, fmt.Errorf("the peer listener cannot listen on %s: %w", addr, err)
	}
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	go func() {
		// A forwarded request whose end never arrives (its replica died)
		// is settled as unclear once it can no longer store anything.
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				if n := s.Handle.ExpireSessions(now); n > 0 {
					klog.FromContext(ctx).Info("Forwarded requests whose end never arrived within the hold period: their grants are settled by looking the objects up", "requests", n)
				}
			}
		}
	}()
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "The peer listener stopped")
		}
	}()
	return ln.Addr(), nil
}
