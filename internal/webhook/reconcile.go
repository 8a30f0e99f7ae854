package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/members"
)

// memberObject is an object of a governed kind in this cluster.
type memberObject struct {
	gvr       schema.GroupVersionResource
	kind      schema.GroupVersionKind
	namespace string
	name      string
	uid       string
}

func (o memberObject) String() string {
	if o.namespace == "" {
		return o.kind.Kind + " " + o.name
	}
	return o.kind.Kind + " " + o.namespace + "/" + o.name
}

// objects are the objects of every watched kind, by UID.
func (w *Webhook) objects() map[string]memberObject {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]memberObject{}
	for gk, ow := range w.watches {
		for _, item := range ow.informer.GetStore().List() {
			m, ok := item.(*metav1.PartialObjectMetadata)
			if !ok || w.excluded(m.Namespace) {
				continue // never sent to the webhook: never charged by it
			}
			out[string(m.UID)] = memberObject{gvr: ow.gvr, kind: gk.WithVersion(ow.gvr.Version), namespace: m.Namespace, name: m.Name, uid: string(m.UID)}
		}
	}
	return out
}

// excluded reports whether the webhook configuration leaves a namespace
// alone.
func (w *Webhook) excluded(ns string) bool {
	return ns != "" && (slices.Contains(members.SystemNamespaces, ns) || slices.Contains(w.opts.ExcludeNamespaces, ns))
}

// waiting reports whether an object without a claim is waiting to be
// charged.
func (w *Webhook) waiting() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.firstSeen) > 0
}

// reconcile makes the quota plane's claims for this cluster true to its
// objects: a claim whose object is not here (a create refused after this
// webhook allowed it, or an object deleted while the webhook was down) is
// released; an object without a claim (created while the webhook was
// bypassed or down) is charged, and said to have been.
func (w *Webhook) reconcile(ctx context.Context) error {
	objects := w.objects()
	list := &quotav1alpha1.ResourceClaimList{}
	if err := w.quotaCache.List(ctx, list); err != nil {
		return err
	}
	now := time.Now()
	cmp := compare(objects, list.Items, now, w.opts.ReleaseAfter)
	for _, c := range cmp.suspect {
		gone, err := w.objectGone(ctx, c)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Looking up the object of a claim", "claim", c.Namespace+"/"+c.Name)
			continue
		}
		if gone {
			w.deleteClaim(ctx, c, "not in the cluster")
		}
	}
	var due []memberObject
	version := w.policyVersion()
	w.mu.Lock()
	for uid := range w.firstSeen {
		if _, ok := objects[uid]; !ok || cmp.claimed[uid] {
			delete(w.firstSeen, uid)
		}
	}
	for _, o := range cmp.unclaimed {
		if w.noCharge[o.uid] == version {
			continue
		}
		first, ok := w.firstSeen[o.uid]
		if !ok {
			w.firstSeen[o.uid] = now
			continue
		}
		if now.Sub(first) >= w.opts.ChargeAfter {
			due = append(due, o)
		}
	}
	w.mu.Unlock()
	for _, o := range due {
		w.chargeExisting(ctx, o)
	}
	return nil
}

// objectGone reads a claim's object here, live: gone when it does not exist
// or is another object of the same name.
func (w *Webhook) objectGone(ctx context.Context, c *quotav1alpha1.ResourceClaim) (bool, error) {
	gvr, ok := quotav1alpha1.ParseResource(c.Annotations[quotav1alpha1.AnnotationResource])
	ref := c.Spec.ResourceRef
	if !ok || ref == nil {
		return false, nil // not a claim for an object: left alone
	}
	o, err := w.memberMetadata.Resource(gvr).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, err
	}
	return string(o.UID) != c.Annotations[quotav1alpha1.AnnotationResourceUID], nil
}

// deleteClaim releases one claim of this cluster.
func (w *Webhook) deleteClaim(ctx context.Context, c *quotav1alpha1.ResourceClaim, why string) {
	err := w.quota.Delete(ctx, c, client.Preconditions{UID: &c.UID})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		klog.FromContext(ctx).Error(err, "Releasing a claim", "claim", c.Namespace+"/"+c.Name)
		return
	}
	if err == nil {
		w.metrics.reconciled("released")
		ref := c.Spec.ResourceRef
		klog.FromContext(ctx).V(2).Info("Released the claim of an object", "claim", c.Namespace+"/"+c.Name, "object", ref, "why", why)
	}
}

const (
	existingExtra     = members.ExistingObjectExtra
	chargedAnnotation = members.ChargedAnnotation
)

// chargeExisting charges an object created while the webhook was bypassed
// or down, through the same decision as a create; over quota, it stays
// uncharged and is reported every period until there is room.
func (w *Webhook) chargeExisting(ctx context.Context, o memberObject) {
	resp, err := w.reviewExisting(ctx, o, false)
	log := klog.FromContext(ctx)
	switch {
	case err != nil:
		log.Error(err, "Charging an object created without the webhook", "object", o.String())
	case resp.Allowed && resp.AuditAnnotations[chargedAnnotation] == "false":
		// No policy charges it (its trigger's constraints leave it out).
		w.mu.Lock()
		w.noCharge[o.uid] = w.policyVersion()
		delete(w.firstSeen, o.uid)
		w.mu.Unlock()
	case resp.Allowed || (resp.Result != nil && resp.Result.Reason == metav1.StatusReasonConflict):
		w.metrics.reconciled("charged")
		msg := fmt.Sprintf("%s was created without quotaplane webhook deciding it (the webhook was bypassed or down); it has now been charged", o)
		log.Info("Charged an object created without the webhook", "object", o.String(), "cluster", w.opts.ClusterName)
		w.events.warn(o, "QuotaChargedLate", msg)
	default:
		w.metrics.reconciled("over_quota")
		msg := fmt.Sprintf("%s was created without quotaplane webhook deciding it (the webhook was bypassed or down) and cannot be charged: %s; it stays uncharged until there is room, or delete it", o, resp.Result.Message)
		log.Info("An object created without the webhook cannot be charged", "object", o.String(), "reason", resp.Result.Message)
		w.events.warn(o, "QuotaUncharged", msg)
	}
}

// reviewExisting asks the quota plane to decide an existing object as a
// create (dryRun: only what it would decide).
func (w *Webhook) reviewExisting(ctx context.Context, o memberObject, dryRun bool) (*admissionv1.AdmissionResponse, error) {
	obj, err := w.memberDynamic.Resource(o.gvr).Namespace(o.namespace).Get(ctx, o.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return &admissionv1.AdmissionResponse{Allowed: true, AuditAnnotations: map[string]string{chargedAnnotation: "false"}}, nil
	}
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, err
	}
	req := &admissionv1.AdmissionRequest{
		UID:      types.UID("existing-" + o.uid),
		Kind:     metav1.GroupVersionKind{Group: o.kind.Group, Version: o.kind.Version, Kind: obj.GetKind()},
		Resource: metav1.GroupVersionResource{Group: o.gvr.Group, Version: o.gvr.Version, Resource: o.gvr.Resource},
		Name:     o.name, Namespace: o.namespace, Operation: admissionv1.Create, DryRun: ptr.To(dryRun),
		UserInfo: authenticationv1.UserInfo{Username: members.ClusterUser(w.opts.ClusterName), Extra: map[string]authenticationv1.ExtraValue{existingExtra: {"true"}}},
	}
	req.Object.Raw = raw
	return w.forward(ctx, req)
}

// policyVersion names the policies in force: an object no policy charged is
// tried again when they change.
func (w *Webhook) policyVersion() string {
	var b strings.Builder
	for _, p := range w.policies.list() {
		fmt.Fprintf(&b, "%s/%d,", p.Name, p.Generation)
	}
	return b.String()
}

// eventSink writes Events about this cluster's objects.
type eventSink struct {
	events func(ns string) eventCreator
}

type eventCreator interface {
	Create(ctx context.Context, e *corev1.Event, opts metav1.CreateOptions) (*corev1.Event, error)
}

func (s *eventSink) warn(o memberObject, reason, msg string) {
	ns := o.namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	now := metav1.Now()
	e := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: o.name + ".", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{APIVersion: o.kind.GroupVersion().String(), Kind: o.kind.Kind, Namespace: o.namespace, Name: o.name, UID: types.UID(o.uid)},
		Reason:         reason, Message: msg, Type: corev1.EventTypeWarning, FirstTimestamp: now, LastTimestamp: now, Count: 1,
		Source: corev1.EventSource{Component: "quotaplane-webhook"},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = s.events(ns).Create(ctx, e, metav1.CreateOptions{})
}

func newEventSink(kube kubernetes.Interface) *eventSink {
	return &eventSink{events: func(ns string) eventCreator { return kube.CoreV1().Events(ns) }}
}
