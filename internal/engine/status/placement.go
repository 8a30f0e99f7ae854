package status

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	toolscache "k8s.io/client-go/tools/cache"

	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/reconcile"
)

// projectsResource are the Projects whose buckets live in their
// organization's namespace.
func projectsResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: quota.OrganizationGroup, Version: "v1alpha1", Resource: "projects"}
}

// projectsRecheck is how often a server without Projects is asked again.
const projectsRecheck = 30 * time.Second

// Placement decides where each bucket lives (quota.Placement) and whether
// that namespace is ready. It learns each Project's organization from a
// watch of Project metadata, started at the first project bucket; on a server
// that does not serve Projects every project is unknown (its buckets are in
// the system namespace). The engine never creates a bucket namespace: a
// bucket whose namespace does not exist waits for it, and is queued again
// (requeue) the moment it appears or a project's organization becomes known.
type Placement struct {
	ctx             context.Context
	systemNamespace string
	kube            kubernetes.Interface
	metadata        metadata.Interface
	requeue         func(quota.BucketID)
	// consumerBuckets lists the buckets of a consumer, to place them again.
	consumerBuckets func(quota.ConsumerID) []quota.BucketID

	nsMu       sync.Mutex
	namespaces map[string]bool // bucket namespaces known to exist
	waitMu     sync.Mutex
	watching   bool
	waiting    map[string]map[quota.BucketID]struct{}

	projMu    sync.Mutex
	projects  toolscache.SharedIndexInformer
	notServed time.Time // when Projects were last found not served
}

// NewPlacement places buckets for one term; watches it starts end with ctx.
func NewPlacement(ctx context.Context, systemNamespace string, kube kubernetes.Interface, md metadata.Interface,
	requeue func(quota.BucketID), consumerBuckets func(quota.ConsumerID) []quota.BucketID) *Placement {
	return &Placement{ctx: ctx, systemNamespace: systemNamespace, kube: kube, metadata: md, requeue: requeue, consumerBuckets: consumerBuckets,
		namespaces: map[string]bool{}, waiting: map[string]map[quota.BucketID]struct{}{}}
}

// Namespace is where a consumer's buckets live now; an error while Projects
// are not listed yet (the bucket is retried).
func (p *Placement) Namespace(c quota.ConsumerID) (string, error) {
	var lookupErr error
	pl := quota.Placement{SystemNamespace: p.systemNamespace, OrganizationOf: func(project string) string {
		org, err := p.organizationOf(project)
		lookupErr = err
		return org
	}}
	ns := pl.Namespace(c)
	return ns, lookupErr
}

// NamespaceReady returns nil when the bucket namespace ns exists and is not
// being deleted (docs/conditions.md, "Where buckets live"). The error is not
// a NotFound, which would drop the bucket.
func (p *Placement) NamespaceReady(ctx context.Context, ns string) error {
	p.nsMu.Lock()
	known := p.namespaces[ns]
	p.nsMu.Unlock()
	if known {
		return nil
	}
	got, err := p.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("bucket namespace %s does not exist yet; the bucket is written once it does", ns)
	case err != nil:
		return fmt.Errorf("reading bucket namespace %s: %v", ns, err)
	case got.DeletionTimestamp != nil || got.Status.Phase == corev1.NamespaceTerminating:
		return fmt.Errorf("bucket namespace %s is being deleted; the bucket is written once it exists again", ns)
	}
	p.nsMu.Lock()
	p.namespaces[ns] = true
	p.nsMu.Unlock()
	return nil
}

// ForgetNamespace forgets that ns exists (it went away since).
func (p *Placement) ForgetNamespace(ns string) {
	p.nsMu.Lock()
	delete(p.namespaces, ns)
	p.nsMu.Unlock()
}

// WaitFor records that bucket id waits for namespace ns, and starts the
// namespace watch that queues it again once ns appears (the bucket's own
// retries with backoff stay as the backstop).
func (p *Placement) WaitFor(ns string, id quota.BucketID) {
	p.waitMu.Lock()
	defer p.waitMu.Unlock()
	if p.waiting[ns] == nil {
		p.waiting[ns] = map[quota.BucketID]struct{}{}
	}
	p.waiting[ns][id] = struct{}{}
	if p.watching {
		return
	}
	p.watching = true
	inf := reconcile.LeanInformer(metadatainformer.NewFilteredMetadataInformer(p.metadata, corev1.SchemeGroupVersion.WithResource("namespaces"),
		metav1.NamespaceAll, 0, toolscache.Indexers{}, nil).Informer())
	appeared := func(obj any) {
		if o, err := reconcile.Meta(obj); err == nil && o.GetDeletionTimestamp() == nil {
			p.namespaceAppeared(o.GetName())
		}
	}
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    appeared,
		UpdateFunc: func(_, obj any) { appeared(obj) },
	})
	go inf.RunWithContext(p.ctx)
}

func (p *Placement) namespaceAppeared(ns string) {
	p.waitMu.Lock()
	ids := p.waiting[ns]
	delete(p.waiting, ns)
	p.waitMu.Unlock()
	for id := range ids {
		p.requeue(id)
	}
}

// organizationOf returns the organization of a project, "" when the project
// does not exist or Projects are not served, and an error while Projects are
// not listed yet.
func (p *Placement) organizationOf(project string) (string, error) {
	inf, err := p.startProjects()
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

// startProjects starts the Project watch once Projects are served; nil when
// they are not.
func (p *Placement) startProjects() (toolscache.SharedIndexInformer, error) {
	p.projMu.Lock()
	defer p.projMu.Unlock()
	if p.projects != nil {
		return p.projects, nil
	}
	if !p.notServed.IsZero() && time.Since(p.notServed) < projectsRecheck {
		return nil, nil
	}
	gvr := projectsResource()
	resources, err := p.kube.Discovery().ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	served := false
	if err == nil {
		for _, r := range resources.APIResources {
			served = served || r.Name == gvr.Resource
		}
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("asking whether Projects are served: %w", err)
	}
	if !served {
		p.notServed = time.Now()
		return nil, nil
	}
	inf := reconcile.LeanInformer(metadatainformer.NewFilteredMetadataInformer(p.metadata, gvr, metav1.NamespaceAll, 0, toolscache.Indexers{}, nil).Informer())
	// A project's organization known or changed: its buckets move there.
	moved := func(obj any) {
		if m, err := reconcile.Meta(obj); err == nil {
			for _, id := range p.consumerBuckets(quota.ConsumerID{APIGroup: quota.OrganizationGroup, Kind: "Project", Name: m.GetName()}) {
				p.requeue(id)
			}
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    moved,
		UpdateFunc: func(_, obj any) { moved(obj) },
	}); err != nil {
		return nil, err
	}
	go inf.Run(p.ctx.Done())
	p.projects = inf
	return inf, nil
}
