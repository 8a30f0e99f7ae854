package peer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

const (
	// LeaseLabel marks replica Leases.
	LeaseLabel = "quota.miloapis.com/replica"
	// AddressAnnotation is the host:port a replica's peer listener is
	// reached at.
	AddressAnnotation = "quota.miloapis.com/peer-address"
	// renewEvery is how often a replica renews its Lease; it lasts three
	// times as long.
	renewEvery = 10 * time.Second
	// resolvedFor is how long a leader's address is used before it is
	// looked up again (sooner when a call to it fails).
	resolvedFor = time.Second
)

// LeaseName is the name of identity's replica Lease: a hash, as the
// kube-apiserver names its identity Leases, since an identity need not be a
// valid object name (the holder names it in full).
func LeaseName(identity string) string {
	sum := sha256.Sum256([]byte(identity))
	return "quotaplane-replica-" + hex.EncodeToString(sum[:8])
}

// Announce keeps identity's replica Lease in namespace, naming address and
// ca (its fingerprints: CAAnnotation, TrustAnnotation), until ctx is done.
func Announce(ctx context.Context, c kubernetes.Interface, namespace, identity, address string, ca CA) {
	for {
		if err := renew(ctx, c, namespace, identity, address, ca); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Renewing this replica's Lease failed; other replicas cannot forward decisions here meanwhile", "lease", LeaseName(identity))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(renewEvery):
		}
	}
}

func renew(ctx context.Context, c kubernetes.Interface, namespace, identity, address string, ca CA) error {
	leases := c.CoordinationV1().Leases(namespace)
	now := metav1.NewMicroTime(time.Now())
	l, err := leases.Get(ctx, LeaseName(identity), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		annotations := map[string]string{AddressAnnotation: address}
		ca.annotate(annotations)
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LeaseName(identity), Namespace: namespace,
			Labels: map[string]string{LeaseLabel: "true"}, Annotations: annotations},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(identity), LeaseDurationSeconds: ptr.To(int32(3 * renewEvery / time.Second)),
				AcquireTime: &now, RenewTime: &now}}
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[AddressAnnotation] = address
	ca.annotate(l.Annotations)
	l.Spec.HolderIdentity, l.Spec.RenewTime = ptr.To(identity), &now
	l.Spec.LeaseDurationSeconds = ptr.To(int32(3 * renewEvery / time.Second))
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}

// ErrSelfLeads: the engine's Lease names this replica, whose engine is
// starting or stopping; its own Handle answers.
var ErrSelfLeads = errors.New("this replica holds the engine's Lease")

// Resolver finds the peer address of the replica whose engine leads.
type Resolver struct {
	Client      kubernetes.Interface
	Namespace   string
	EngineLease string
	Self        string

	mu      sync.Mutex
	address string
	at      time.Time
}

// Address is the leader's peer address.
func (r *Resolver) Address(ctx context.Context) (string, error) {
	r.mu.Lock()
	if r.address != "" && time.Since(r.at) < resolvedFor {
		a := r.address
		r.mu.Unlock()
		return a, nil
	}
	r.mu.Unlock()
	holder, l, err := r.leaderLease(ctx)
	if err != nil {
		return "", err
	}
	addr := l.Annotations[AddressAnnotation]
	if addr == "" {
		return "", fmt.Errorf("the leading replica %s announces no peer address", holder)
	}
	r.mu.Lock()
	r.address, r.at = addr, time.Now()
	r.mu.Unlock()
	return addr, nil
}

// errNoLeader: the engine's Lease names no holder.
var errNoLeader = errors.New("no replica holds the engine's Lease")

// leaderLease is the replica Lease of the replica whose engine leads, and
// that replica's identity.
func (r *Resolver) leaderLease(ctx context.Context) (string, *coordinationv1.Lease, error) {
	engine, err := r.Client.CoordinationV1().Leases(r.Namespace).Get(ctx, r.EngineLease, metav1.GetOptions{})
	if err != nil {
		return "", nil, fmt.Errorf("reading the engine's Lease %s/%s: %w", r.Namespace, r.EngineLease, err)
	}
	holder := ptr.Deref(engine.Spec.HolderIdentity, "")
	switch {
	case holder == "":
		return "", nil, fmt.Errorf("%w %s/%s", errNoLeader, r.Namespace, r.EngineLease)
	case holder == r.Self:
		return holder, nil, ErrSelfLeads
	}
	l, err := r.Client.CoordinationV1().Leases(r.Namespace).Get(ctx, LeaseName(holder), metav1.GetOptions{})
	if err != nil {
		return holder, nil, fmt.Errorf("reading the Lease of the leading replica %s: %w", holder, err)
	}
	return holder, l, nil
}

// Forget drops the address found: the next call looks it up again.
func (r *Resolver) Forget() {
	r.mu.Lock()
	r.address = ""
	r.mu.Unlock()
}
