package quotarequest

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/requests"
)

// dynamicLookup reads Projects and registrations through the admission's
// dynamic client.
type dynamicLookup struct{ client dynamic.Interface }

func (l dynamicLookup) ProjectOrganization(ctx context.Context, name string) (string, bool, error) {
	u, err := l.client.Resource(rmv1alpha1.SchemeGroupVersion.WithResource("projects")).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	p := &rmv1alpha1.Project{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, p); err != nil {
		return "", false, err
	}
	return requests.ProjectOrganization(p), true, nil
}

func (l dynamicLookup) Registrations(ctx context.Context) ([]quotav1alpha1.ResourceRegistration, error) {
	list, err := l.client.Resource(quotav1alpha1.SchemeGroupVersion.WithResource("resourceregistrations")).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	out := make([]quotav1alpha1.ResourceRegistration, 0, len(list.Items))
	for _, u := range list.Items {
		r := quotav1alpha1.ResourceRegistration{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}
