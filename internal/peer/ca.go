package peer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	"github.com/quotaplane/quotaplane/internal/server/pki"
)

const (
	// CAAnnotation, on a replica Lease, is the fingerprint (pki.Fingerprint)
	// of the peer CA that signed the replica's peer certificate.
	CAAnnotation = "quota.miloapis.com/peer-ca"
	// TrustAnnotation, on a replica Lease, is the comma-separated
	// fingerprints of every CA in the replica's peer-ca.crt: those its peer
	// listener and client trust.
	TrustAnnotation = "quota.miloapis.com/peer-trust"
	// CACheckName is the readiness check that fails while this replica and
	// the leading one do not trust each other's peer CA.
	CACheckName = "quotaplane-peer-ca"
)

// CA is what a replica announces of its peer PKI, by fingerprint.
type CA struct {
	// Signer is the CA that signed the replica's peer certificate.
	Signer string
	// Trust are the CAs of its peer-ca.crt, the signing one first.
	Trust []string
}

// ReadCA reads f's peer CA bundle and finds the CA in it that signed f's
// peer certificate.
func ReadCA(f pki.Files) (CA, error) {
	cas, err := pki.Certificates(f.PeerCACert)
	if err != nil {
		return CA{}, fmt.Errorf("reading the peer CA: %w", err)
	}
	own, err := pki.Certificates(f.PeerCert)
	if err != nil {
		return CA{}, fmt.Errorf("reading this replica's peer certificate: %w", err)
	}
	var ca CA
	for _, c := range cas {
		fp := pki.Fingerprint(c)
		ca.Trust = append(ca.Trust, fp)
		if ca.Signer == "" && own[0].CheckSignatureFrom(c) == nil {
			ca.Signer = fp
		}
	}
	if ca.Signer == "" {
		return CA{}, fmt.Errorf("this replica's peer certificate %s is signed by none of the CAs in %s: remove %s and %s and restart, and they are signed again", f.PeerCert, f.PeerCACert, f.PeerCert, f.PeerKey)
	}
	return ca, nil
}

// Reaches reports whether c and other each trust the CA that signed the
// other's peer certificate, as mutual TLS between them needs.
func (c CA) Reaches(other CA) bool {
	return slices.Contains(c.Trust, other.Signer) && slices.Contains(other.Trust, c.Signer)
}

func (c CA) annotate(a map[string]string) {
	if c.Signer == "" {
		return
	}
	a[CAAnnotation] = c.Signer
	a[TrustAnnotation] = strings.Join(c.Trust, ",")
}

// announcedCA is the CA l announces; false when it announces none: a
// replica of a version before the annotations.
func announcedCA(l *coordinationv1.Lease) (CA, bool) {
	signer, trust := l.Annotations[CAAnnotation], l.Annotations[TrustAnnotation]
	if signer == "" || trust == "" {
		return CA{}, false
	}
	return CA{Signer: signer, Trust: strings.Split(trust, ",")}, true
}

// CACheck is the readiness check CACheckName. A replica whose peer CA and
// the leader's do not trust each other cannot ask the leader for decisions:
// every governed write it admits waits out its 10 s and is refused with 504.
// The check fails meanwhile, saying which files to copy, so that a load
// balancer sends nothing there. It passes while this replica leads, while
// no replica leads, and when the leader's Lease announces no CA (a replica
// of an earlier version, which cannot say).
type CACheck struct {
	mu      sync.Mutex
	problem error
}

// Check is the check's answer.
func (c *CACheck) Check(*http.Request) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.problem
}

// Start compares own with what the leading replica announces, now and then
// every renewEvery until ctx is done.
func (c *CACheck) Start(ctx context.Context, leader *Resolver, own CA, f pki.Files) {
	c.compare(ctx, leader, own, f)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(renewEvery):
			}
			c.compare(ctx, leader, own, f)
		}
	}()
}

func (c *CACheck) compare(ctx context.Context, r *Resolver, own CA, f pki.Files) {
	rctx, cancel := context.WithTimeout(ctx, renewEvery/2)
	defer cancel()
	holder, l, err := r.leaderLease(rctx)
	switch {
	case errors.Is(err, ErrSelfLeads), errors.Is(err, errNoLeader), err != nil && apierrors.IsNotFound(err) && holder == "":
		c.set(ctx, nil)
		return
	case err != nil:
		// The leader's Lease not written yet, or etcd unreachable: the
		// state stays as it was, and the next round looks again.
		klog.FromContext(ctx).V(2).Info("Could not compare this replica's peer CA with the leading replica's", "err", err)
		return
	}
	theirs, announced := announcedCA(l)
	if !announced || own.Reaches(theirs) {
		c.set(ctx, nil)
		return
	}
	c.set(ctx, &caMismatch{leader: holder, theirs: theirs, own: own, files: f})
}

// set records m (nil: the CAs agree) and logs a change: one line when the
// CAs stop agreeing (or disagree differently), one when they agree again.
func (c *CACheck) set(ctx context.Context, m *caMismatch) {
	var problem error
	if m != nil {
		problem = m
	}
	c.mu.Lock()
	before := c.problem
	c.problem = problem
	c.mu.Unlock()
	logger := klog.FromContext(ctx)
	switch {
	case m != nil && (before == nil || before.Error() != m.Error()):
		logger.Error(nil, "This replica's peer CA and the leading replica's do not trust each other: this replica cannot ask the leader for decisions and refuses readiness. "+
			"Copy peer-ca.crt and peer-ca.key from the leading replica's data directory (pki/) into this replica's, remove this replica's peer.crt and peer.key, and restart it",
			"check", CACheckName, "leader", m.leader, "leaderPeerCA", m.theirs.Signer, "leaderTrusts", strings.Join(m.theirs.Trust, ","),
			"peerCA", m.own.Signer, "trusts", strings.Join(m.own.Trust, ","), "copyInto", m.files.Dir, "remove", m.files.PeerCert+","+m.files.PeerKey)
	case m == nil && before != nil:
		logger.Info("This replica's peer CA and the leading replica's trust each other again: the peer CA check passes", "check", CACheckName)
	}
}

// caMismatch is the check's failure.
type caMismatch struct {
	leader      string
	theirs, own CA
	files       pki.Files
}

func (m *caMismatch) Error() string {
	return fmt.Sprintf("this replica's peer certificate is signed by the peer CA %s and it trusts %s; the leading replica %s's is signed by %s and it trusts %s: they cannot reach each other. "+
		"Copy peer-ca.crt and peer-ca.key from the leading replica's data directory (pki/) into %s, remove %s and %s, and restart this replica (docs/operations.md)",
		m.own.Signer, strings.Join(m.own.Trust, ","), m.leader, m.theirs.Signer, strings.Join(m.theirs.Trust, ","), m.files.Dir, m.files.PeerCert, m.files.PeerKey)
}
