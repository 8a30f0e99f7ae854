package engine

import (
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// projectsResource are the Projects whose buckets live in their
// organization's namespace.
var projectsResource = schema.GroupVersionResource{Group: quota.OrganizationGroup, Version: "v1alpha1", Resource: "projects"}

const (
	// projectsRecheck is how often a server without Projects is asked again.
	projectsRecheck = 30 * time.Second
)

// projectOrgs knows each Project's organization, so that a project's
// buckets are placed in its organization's namespace where the
// organization's owners read them. It watches Project metadata, started at
// the first project bucket; on a server that does not serve Projects every
// project is unknown (its buckets are in the system namespace).
type projectOrgs struct {
	t *term

	mu         sync.Mutex
	informer   cache.SharedIndexInformer
	notServed  time.Time // when Projects were last found not served
	registered bool
}

// organizationOf returns the organization of a project, "" when the project
// does not exist or Projects are not served, and an error while Projects are
// not listed yet (the bucket is retried).
func (p *projectOrgs) organizationOf(project string) (string, error) {
	inf, err := p.start()
	if err != nil || inf == nil {
		return "", err
	}
	if !inf.HasSynced() {
		return "", fmt.Errorf("waiting for the Projects to be listed to place project %s's buckets in its organization's namespace", project)
	}
	obj, found, err := inf.GetStore().GetByKey(project)
	if err != nil || !found {
		return "", err
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return "", nil
	}
	return rmv1alpha1.OrganizationOfProject(m), nil
}

// start starts the Project watch once Projects are served; nil when they are
// not.
func (p *projectOrgs) start() (cache.SharedIndexInformer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.informer != nil {
		return p.informer, nil
	}
	if !p.notServed.IsZero() && time.Since(p.notServed) < projectsRecheck {
		return nil, nil
	}
	resources, err := p.t.r.kube.Discovery().ServerResourcesForGroupVersion(projectsResource.GroupVersion().String())
	served := false
	if err == nil {
		for _, r := range resources.APIResources {
			served = served || r.Name == projectsResource.Resource
		}
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("asking whether Projects are served: %w", err)
	}
	if !served {
		p.notServed = time.Now()
		return nil, nil
	}
	inf := metadatainformer.NewFilteredMetadataInformer(p.t.r.metadata, projectsResource, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	// A project's organization known or changed: its buckets move there.
	requeue := func(obj any) {
		if m, err := metaOf(obj); err == nil {
			p.t.requeueConsumerBuckets(quota.ConsumerID{APIGroup: quota.OrganizationGroup, Kind: "Project", Name: m.GetName()})
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    requeue,
		UpdateFunc: func(_, obj any) { requeue(obj) },
	}); err != nil {
		return nil, err
	}
	go inf.Run(p.t.ctx.Done())
	p.informer = inf
	return inf, nil
}

func metaOf(obj any) (metav1.Object, error) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no object metadata", obj)
	}
	return m, nil
}

// requeueConsumerBuckets writes every bucket of one consumer again.
func (t *term) requeueConsumerBuckets(c quota.ConsumerID) {
	t.mu.Lock()
	ids := t.eng.BucketIDs()
	t.mu.Unlock()
	for _, id := range ids {
		if id.Consumer == c {
			t.buckets.Add(id)
		}
	}
}

// bucketNamespace is where a bucket lives now.
func (t *term) bucketNamespace(c quota.ConsumerID) (string, error) {
	var lookupErr error
	p := quota.Placement{SystemNamespace: t.r.opts.SystemNamespace, OrganizationOf: func(project string) string {
		org, err := t.projects.organizationOf(project)
		lookupErr = err
		return org
	}}
	ns := p.Namespace(c)
	return ns, lookupErr
}
