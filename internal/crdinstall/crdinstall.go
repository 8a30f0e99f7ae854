package crdinstall

import (
	"context"
	"fmt"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/quotaplane/quotaplane/config/crd"
	"github.com/quotaplane/quotaplane/config/rbac"
)

// Install creates or updates every quota CRD and waits until all are
// established, or until ctx is done.
func Install(ctx context.Context, cfg *rest.Config) error {
	client, err := apiextensionsclient.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), "quotaplane-crd-installer"))
	if err != nil {
		return err
	}
	crds, err := crd.ForServe()
	if err != nil {
		return err
	}
	for _, want := range crds {
		if err := apply(ctx, client, want); err != nil {
			return fmt.Errorf("installing CRD %s: %w", want.Name, err)
		}
	}
	for _, want := range crds {
		if err := waitEstablished(ctx, client, want.Name); err != nil {
			return err
		}
	}
	return InstallRoles(ctx, cfg)
}

func apply(ctx context.Context, client apiextensionsclient.Interface, want *apiextensionsv1.CustomResourceDefinition) error {
	logger := klog.FromContext(ctx)
	// Another replica starting at the same moment may create it first: an
	// "already exists" is retried like a conflict, as an update.
	return retry.OnError(retry.DefaultRetry, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	}, func() error {
		crds := client.ApiextensionsV1().CustomResourceDefinitions()
		have, err := crds.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = crds.Create(ctx, want, metav1.CreateOptions{FieldManager: "quotaplane"})
			if err == nil {
				logger.V(2).Info("Created CRD", "crd", want.Name)
			}
			return err
		}
		if err != nil {
			return err
		}
		if equality.Semantic.DeepDerivative(want.Spec, have.Spec) && equality.Semantic.DeepDerivative(want.Labels, have.Labels) {
			return nil
		}
		updated := have.DeepCopy()
		updated.Spec = want.Spec
		if updated.Labels == nil {
			updated.Labels = map[string]string{}
		}
		for k, v := range want.Labels {
			updated.Labels[k] = v
		}
		_, err = crds.Update(ctx, updated, metav1.UpdateOptions{FieldManager: "quotaplane"})
		if err == nil {
			logger.Info("Updated CRD to the schema of this version", "crd", want.Name)
		}
		return err
	})
}

func waitEstablished(ctx context.Context, client apiextensionsclient.Interface, name string) error {
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		c, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range c.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
			if cond.Type == apiextensionsv1.NamesAccepted && cond.Status == apiextensionsv1.ConditionFalse {
				return false, fmt.Errorf("CRD %s names not accepted: %s", name, cond.Message)
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for CRD %s to be established: %w", name, err)
	}
	return nil
}

// InstallRoles creates or updates the ClusterRoles quotaplane ships
// (config/rbac), so that the authorization docs/authorization.md describes
// works out of the box.
func InstallRoles(ctx context.Context, cfg *rest.Config) error {
	client, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), "quotaplane-crd-installer"))
	if err != nil {
		return err
	}
	roles, err := rbac.ClusterRoles()
	if err != nil {
		return err
	}
	for _, want := range roles {
		err := retry.OnError(startupBackoff, func(err error) bool {
			return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || notReadyYet(err)
		}, func() error {
			have, err := client.RbacV1().ClusterRoles().Get(ctx, want.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				_, err = client.RbacV1().ClusterRoles().Create(ctx, want, metav1.CreateOptions{})
				return err
			}
			if err != nil {
				return err
			}
			if equality.Semantic.DeepEqual(have.Rules, want.Rules) && equality.Semantic.DeepEqual(have.Labels, want.Labels) {
				return nil
			}
			have.Rules, have.Labels = want.Rules, want.Labels
			_, err = client.RbacV1().ClusterRoles().Update(ctx, have, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("installing ClusterRole %s: %w", want.Name, err)
		}
	}
	return bindReviewers(ctx, client)
}

// startupBackoff bounds the retries of a write made while the server starts:
// about two minutes. With a million objects stored, admission plugins'
// informers take that long to list them, and refuse writes until they have.
var startupBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 1.5, Jitter: 0.1, Steps: 40, Cap: 5 * time.Second}

// notReadyYet reports an error that passes once the server has started: an
// admission plugin not ready yet (a 403 saying so), or the server busy.
func notReadyYet(err error) bool {
	return (apierrors.IsForbidden(err) && strings.Contains(err.Error(), "not yet ready to handle request")) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err)
}

// ReviewerRole is the ClusterRole every authenticated user is bound to:
// creating QuotaReviews, as system:basic-user creates
// SelfSubjectAccessReviews.
const ReviewerRole = "quotaplane-quota-reviewer"

// bindReviewers binds ReviewerRole to system:authenticated, once: a binding
// an administrator changed since is left as it is.
func bindReviewers(ctx context.Context, client kubernetes.Interface) error {
	b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ReviewerRole, Labels: map[string]string{"app.kubernetes.io/part-of": "quotaplane"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ReviewerRole},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: user.AllAuthenticated}}}
	err := retry.OnError(startupBackoff, notReadyYet, func() error {
		_, err := client.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{})
		return err
	})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding ClusterRole %s to %s: %w", ReviewerRole, user.AllAuthenticated, err)
	}
	return nil
}
