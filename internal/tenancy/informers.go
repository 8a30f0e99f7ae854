package tenancy

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/reconcile"
)

// Index keys of the project informer.
const (
	// projectOwnerIndex indexes Projects by spec.ownerRef.name.
	projectOwnerIndex = "spec.ownerRef.name"
)

// resyncPeriod is how often every cached object is handed to the handlers
// again, so that what no event announced is reconciled all the same.
const resyncPeriod = 10 * time.Hour

// informerSet is one term's informers: every Organization and Project, and
// the namespaces and RBAC objects labelled with an organization's name (the
// only ones the controllers make; standbys watch nothing).
type informerSet struct {
	orgs, projects                                              toolscache.SharedIndexInformer
	factory                                                     informers.SharedInformerFactory
	namespaces, roleBindings, clusterRoles, clusterRoleBindings toolscache.SharedIndexInformer
	wg                                                          sync.WaitGroup
}

func newInformers(kube kubernetes.Interface, cl client.WithWatch) *informerSet {
	s := &informerSet{
		orgs:     listWatch(cl, &rmv1alpha1.Organization{}, &rmv1alpha1.OrganizationList{}, toolscache.Indexers{}),
		projects: listWatch(cl, &rmv1alpha1.Project{}, &rmv1alpha1.ProjectList{}, toolscache.Indexers{projectOwnerIndex: projectOwner}),
		factory: informers.NewSharedInformerFactoryWithOptions(kube, resyncPeriod, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = rmv1alpha1.OrganizationNameLabel // exists
		})),
	}
	s.namespaces = s.factory.Core().V1().Namespaces().Informer()
	s.roleBindings = s.factory.Rbac().V1().RoleBindings().Informer()
	s.clusterRoles = s.factory.Rbac().V1().ClusterRoles().Informer()
	s.clusterRoleBindings = s.factory.Rbac().V1().ClusterRoleBindings().Informer()
	return s
}

// listWatch is an informer of a tenancy kind (a CRD, which the typed
// clientset does not know) through the controller-runtime client.
func listWatch(cl client.WithWatch, obj client.Object, list client.ObjectList, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			l := list.DeepCopyObject().(client.ObjectList)
			if err := cl.List(ctx, l, &client.ListOptions{Raw: &opts}); err != nil {
				return nil, err
			}
			return l, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return cl.Watch(ctx, list.DeepCopyObject().(client.ObjectList), &client.ListOptions{Raw: &opts})
		},
	}
	return reconcile.LeanInformer(toolscache.NewSharedIndexInformer(lw, obj, resyncPeriod, indexers))
}

func projectOwner(obj any) ([]string, error) {
	p, ok := obj.(*rmv1alpha1.Project)
	if !ok {
		return nil, nil
	}
	return []string{p.Spec.OwnerRef.Name}, nil
}

// addHandlers maps every change to the keys it concerns: an organization
// and everything labelled with its name or naming it as owner to the
// organization's queue; a project, and every project of a changed
// organization, to the project's queue. It returns what says that each
// handler has seen its informer's first list.
func (s *informerSet) addHandlers(orgs, projects reconcile.Queue[string]) ([]toolscache.InformerSynced, error) {
	var synced []toolscache.InformerSynced
	add := func(inf toolscache.SharedIndexInformer, q reconcile.Queue[string], keys func(obj any) []string) error {
		reg, err := inf.AddEventHandler(enqueue(q, keys))
		if err != nil {
			return err
		}
		synced = append(synced, reg.HasSynced)
		return nil
	}
	projectsOf := func(obj any) []string { return projectsOf(s.projects.GetIndexer(), obj) }
	for _, h := range []struct {
		inf  toolscache.SharedIndexInformer
		q    reconcile.Queue[string]
		keys func(obj any) []string
	}{
		{s.orgs, orgs, ownName},
		{s.namespaces, orgs, organizationLabel},
		{s.roleBindings, orgs, organizationLabel},
		{s.clusterRoles, orgs, organizationLabel},
		{s.clusterRoleBindings, orgs, organizationLabel},
		{s.projects, orgs, ownerOrganization},
		{s.projects, projects, ownName},
		{s.orgs, projects, projectsOf},
	} {
		if err := add(h.inf, h.q, h.keys); err != nil {
			return nil, err
		}
	}
	return synced, nil
}

// start runs the informers until ctx ends; wait waits for them afterwards.
func (s *informerSet) start(ctx context.Context) {
	s.wg.Go(func() { s.orgs.RunWithContext(ctx) })
	s.wg.Go(func() { s.projects.RunWithContext(ctx) })
	s.factory.Start(ctx.Done())
}

func (s *informerSet) wait() {
	s.wg.Wait()
	s.factory.Shutdown()
}

func (s *informerSet) stores() *stores {
	return &stores{
		organizations: s.orgs.GetIndexer(), projects: s.projects.GetIndexer(),
		namespaces: s.namespaces.GetIndexer(), roleBindings: s.roleBindings.GetIndexer(),
		clusterRoles: s.clusterRoles.GetIndexer(), clusterRoleBindings: s.clusterRoleBindings.GetIndexer(),
	}
}

// enqueue adds to q the keys of every state an event carries: both states
// of an update, the last known state of a delete.
func enqueue(q reconcile.Queue[string], keys func(obj any) []string) toolscache.ResourceEventHandlerFuncs {
	add := func(obj any) {
		obj = reconcile.Unwrap(obj)
		for _, k := range keys(obj) {
			q.Add(k)
		}
	}
	return toolscache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(old, obj any) { add(old); add(obj) }, DeleteFunc: add}
}

// ownName is the key of the object itself.
func ownName(obj any) []string {
	o, err := meta.Accessor(obj)
	if err != nil || o.GetName() == "" {
		return nil
	}
	return []string{o.GetName()}
}

// organizationLabel is the organization an object is labelled with.
func organizationLabel(obj any) []string {
	o, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	if name := o.GetLabels()[rmv1alpha1.OrganizationNameLabel]; name != "" {
		return []string{name}
	}
	return nil
}

// ownerOrganization is the organization a project names as its owner.
func ownerOrganization(obj any) []string {
	p, ok := obj.(*rmv1alpha1.Project)
	if !ok || p.Spec.OwnerRef.Name == "" {
		return nil
	}
	return []string{p.Spec.OwnerRef.Name}
}

// projectsOf are the projects naming an organization as their owner.
func projectsOf(projects toolscache.Indexer, obj any) []string {
	o, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	keys, err := projects.IndexKeys(projectOwnerIndex, o.GetName())
	if err != nil {
		return nil
	}
	return keys
}

// stores are what the reconcilers read from a term's informers.
type stores struct {
	organizations, projects, namespaces, roleBindings, clusterRoles, clusterRoleBindings toolscache.Indexer
}

// get copies the object named key from the store of obj's kind into obj,
// or returns NotFound.
func (s *stores) get(key client.ObjectKey, obj client.Object) error {
	store, resource := s.of(obj)
	if store == nil {
		return fmt.Errorf("the tenancy controllers cache no %T", obj)
	}
	k := key.Name
	if key.Namespace != "" {
		k = key.Namespace + "/" + key.Name
	}
	item, exists, err := store.GetByKey(k)
	if err != nil {
		return err
	}
	if !exists {
		return apierrors.NewNotFound(schema.GroupResource{Resource: resource}, k)
	}
	src, ok := item.(runtime.Object)
	if !ok || reflect.TypeOf(item) != reflect.TypeOf(obj) {
		return fmt.Errorf("the cache holds a %T under %s", item, k)
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(src.DeepCopyObject()).Elem())
	return nil
}

// of is the store of obj's kind, and the kind's resource.
func (s *stores) of(obj client.Object) (toolscache.Indexer, string) {
	switch obj.(type) {
	case *rmv1alpha1.Organization:
		return s.organizations, "organizations"
	case *rmv1alpha1.Project:
		return s.projects, "projects"
	case *corev1.Namespace:
		return s.namespaces, "namespaces"
	case *rbacv1.RoleBinding:
		return s.roleBindings, "rolebindings"
	case *rbacv1.ClusterRole:
		return s.clusterRoles, "clusterroles"
	case *rbacv1.ClusterRoleBinding:
		return s.clusterRoleBindings, "clusterrolebindings"
	}
	return nil, ""
}

// projectsOf are copies of the projects naming org as their owner, by name.
func (s *stores) projectsOf(org string) ([]*rmv1alpha1.Project, error) {
	items, err := s.projects.ByIndex(projectOwnerIndex, org)
	if err != nil {
		return nil, err
	}
	out := make([]*rmv1alpha1.Project, 0, len(items))
	for _, item := range items {
		if p, ok := item.(*rmv1alpha1.Project); ok {
			out = append(out, p.DeepCopy())
		}
	}
	slices.SortFunc(out, func(a, b *rmv1alpha1.Project) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
