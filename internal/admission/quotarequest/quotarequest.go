package quotarequest

import (
	"context"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/authentication/user"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/admission/plugininit"
	"github.com/quotaplane/quotaplane/internal/requests"
)

// PluginName is the admission plugin's name.
const PluginName = "QuotaRequests"

// Register adds the plugin to plugins.
func Register(plugins *admission.Plugins) {
	plugins.Register(PluginName, func(io.Reader) (admission.Interface, error) {
		return &plugin{Handler: admission.NewHandler(admission.Create, admission.Update, admission.Delete),
			DynamicClient: plugininit.NewDynamicClient(PluginName), now: time.Now}, nil
	})
}

type plugin struct {
	*admission.Handler
	plugininit.DynamicClient
	now func() time.Time
}

var (
	_ admission.MutationInterface       = &plugin{}
	_ admission.ValidationInterface     = &plugin{}
	_ initializer.WantsDynamicClient    = &plugin{}
	_ admission.InitializationValidator = &plugin{}

	quotaRequests = quotav1alpha1.Resource("quotarequests")
	kind          = quotav1alpha1.SchemeGroupVersion.WithKind("QuotaRequest").GroupKind()
	decidedByPath = field.NewPath("status", "decision", "decidedBy")
)

func objects(a admission.Attributes) (obj, old *unstructured.Unstructured, ok bool) {
	if a.GetResource().GroupResource() != quotaRequests {
		return nil, nil, false
	}
	obj, ok = plugininit.Unstructured(a.GetObject())
	old, _ = plugininit.Unstructured(a.GetOldObject())
	return obj, old, ok
}

// Admit records who asked and who decided.
func (p *plugin) Admit(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	obj, old, ok := objects(a)
	if !ok {
		return nil
	}
	if err := p.admit(a, obj, old); err != nil {
		return err
	}
	return plugininit.Store(obj, a.GetObject())
}

func (p *plugin) admit(a admission.Attributes, obj, old *unstructured.Unstructured) error {
	switch {
	case a.GetOperation() == admission.Create && a.GetSubresource() == "":
		setAnnotation(obj, quotav1alpha1.AnnotationRequestedBy, a.GetUserInfo().GetName())
	case a.GetOperation() == admission.Update && a.GetSubresource() == "" && old != nil:
		setAnnotation(obj, quotav1alpha1.AnnotationRequestedBy, old.GetAnnotations()[quotav1alpha1.AnnotationRequestedBy])
	case a.GetOperation() == admission.Update && a.GetSubresource() == "status" && old != nil:
		_, had, _ := unstructured.NestedMap(old.Object, "status", "decision")
		d, has, _ := unstructured.NestedMap(obj.Object, "status", "decision")
		if had || !has {
			return nil
		}
		// What is decided is what the stored request asks for, whatever
		// the client sent: the grant is written from this.
		for _, f := range decidedFields {
			if v, ok, _ := unstructured.NestedFieldCopy(old.Object, "spec", f); ok {
				d[f] = v
			} else {
				delete(d, f)
			}
		}
		if !isSelf(a.GetUserInfo()) || d["decidedBy"] == nil {
			d["decidedBy"] = a.GetUserInfo().GetName()
			d["decidedAt"] = metav1.NewTime(p.now()).UTC().Format(time.RFC3339)
		}
		return unstructured.SetNestedMap(obj.Object, d, "status", "decision")
	}
	return nil
}

// decidedFields are the spec's fields a decision records.
var decidedFields = []string{"consumerRef", "resourceType", "dimensions"}

// isSelf is serve's own loopback identity: its request controller records
// the decisions it makes itself (rule:<name>, quotaplane).
func isSelf(u user.Info) bool { return u.GetName() == user.APIServerUser }

// Validate refuses requests that can never be met, a decision by the
// requester, and anyone but the request controller writing a request's grant.
func (p *plugin) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() == resourceGrants {
		return validateGrant(a)
	}
	obj, old, ok := objects(a)
	if !ok {
		return nil
	}
	switch {
	case a.GetOperation() == admission.Create && a.GetSubresource() == "" && obj != nil:
		qr := &quotav1alpha1.QuotaRequest{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, qr); err != nil {
			return apierrors.NewBadRequest(err.Error())
		}
		ferr, err := requests.Check(ctx, dynamicLookup{p.Client()}, qr)
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("checking the quota request: %w", err))
		}
		if ferr != nil {
			return apierrors.NewInvalid(kind, a.GetName(), field.ErrorList{ferr})
		}
	case a.GetOperation() == admission.Update && a.GetSubresource() == "status" && old != nil:
		_, had, _ := unstructured.NestedMap(old.Object, "status", "decision")
		_, has, _ := unstructured.NestedMap(obj.Object, "status", "decision")
		asker := old.GetAnnotations()[quotav1alpha1.AnnotationRequestedBy]
		if !had && has && !isSelf(a.GetUserInfo()) && asker != "" && asker == a.GetUserInfo().GetName() {
			return apierrors.NewForbidden(quotaRequests, a.GetName(), field.Forbidden(decidedByPath,
				fmt.Sprintf("%s asked for this request and cannot decide it: another member of staff must approve or deny it", asker)))
		}
	}
	return nil
}

func setAnnotation(obj *unstructured.Unstructured, k, v string) {
	ann := obj.GetAnnotations()
	if v == "" {
		if _, ok := ann[k]; ok {
			delete(ann, k)
			obj.SetAnnotations(ann)
		}
		return
	}
	if ann == nil {
		ann = map[string]string{}
	}
	ann[k] = v
	obj.SetAnnotations(ann)
}
