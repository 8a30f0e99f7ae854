package charge

import (
	"context"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/warning"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/charge/inforce"
)

// Results of admission, one per policy that applied to a create.
const (
	resultGranted       = "granted"
	resultDenied        = "denied"
	resultFailOpen      = "fail_open"
	resultUndecided     = "undecided"
	resultInvalidObject = "invalid_object"
	resultInvalidClaim  = "invalid_claim"
	resultNameTaken     = "name_taken"
	resultUnauthorized  = "unauthorized"
	// Under mode Warn or Audit (trial.go): what enforcing would have done.
	resultWouldCharge = "would_charge"
	resultWouldRefuse = "would_refuse"
)

// reporter tells operators and clients what admission did that they must
// know: every result counted, denials and fail-open admissions as Warning
// Events on the policy — through an event recorder whose correlator
// aggregates repeats and rate-limits bursts, so a flood of creates cannot
// flood storage with Events.
type reporter struct {
	ch        *Charger
	startOnce sync.Once
	recorder  record.EventRecorder
}

func newReporter(ch *Charger) *reporter {
	return &reporter{ch: ch}
}

func (r *reporter) events() record.EventRecorder {
	r.startOnce.Do(func() {
		if r.ch.kube == nil {
			return
		}
		scheme := runtime.NewScheme()
		if err := quotav1alpha1.AddToScheme(scheme); err != nil {
			return
		}
		b := record.NewBroadcaster()
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: r.ch.kube.CoreV1().Events("")})
		r.recorder = b.NewRecorder(scheme, corev1.EventSource{Component: "quotaplane-admission"})
	})
	return r.recorder
}

func (r *reporter) result(policy, result string) {
	r.countResult(policy, result, quotav1alpha1.PolicyModeEnforce)
}

// resultFor counts a result of the version f, in its mode.
func (r *reporter) resultFor(f *inforce.Policy, result string) {
	r.countResult(f.Name, result, f.Mode)
}

func (r *reporter) resultAll(applying []*inforce.Policy, result string) {
	for _, f := range applying {
		r.result(f.Name, result)
	}
}

func (r *reporter) event(applying []*inforce.Policy, reason, msg string) {
	rec := r.events()
	if rec == nil {
		return
	}
	for _, f := range applying {
		ref := &corev1.ObjectReference{APIVersion: quotav1alpha1.SchemeGroupVersion.String(), Kind: "ClaimCreationPolicy", Name: f.Name, UID: f.UID}
		rec.Event(ref, corev1.EventTypeWarning, reason, truncate(msg, 1024))
	}
}

// denied records a quota denial on each applying policy.
func (r *reporter) denied(applying []*inforce.Policy, msg string) {
	r.event(applying, "QuotaExceeded", msg)
}

// failedOpen records a fail-open admission on each policy, and warns the
// client in its response.
func (r *reporter) failedOpen(ctx context.Context, applying []*inforce.Policy, msg string) {
	r.event(applying, "AdmittedFailOpen", msg)
	warning.AddWarning(ctx, "", msg)
	r.logger(ctx).Info("Admitted a create without quota (fail-open)", "detail", msg)
}

func (r *reporter) logger(ctx context.Context) logr.Logger { return klog.FromContext(ctx) }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
