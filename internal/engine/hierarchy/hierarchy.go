package hierarchy

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/reconcile"
)

// ParentRelation declares where a consumer kind's parent is found: objects
// of kind Child name their parent, of kind Parent, in the label Label. The
// label must be one tenants cannot set freely; for Projects the tenancy
// admission keeps it equal to the immutable spec.ownerRef.
type ParentRelation struct {
	Child, Parent quota.GroupKind
	Label         string
}

// DefaultParents are Project → Organization.
func DefaultParents() []ParentRelation {
	return []ParentRelation{{
		Child:  quota.GroupKind{Group: quota.OrganizationGroup, Kind: "Project"},
		Parent: quota.GroupKind{Group: quota.OrganizationGroup, Kind: "Organization"},
		Label:  rmv1alpha1.OrganizationNameLabel,
	}}
}

// ParseParentRelation reads "Child.group=Parent.group:label".
func ParseParentRelation(s string) (ParentRelation, error) {
	child, rest, ok := strings.Cut(s, "=")
	parent, label, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || child == "" || parent == "" || label == "" {
		return ParentRelation{}, fmt.Errorf("--consumer-parent %q: want Kind.group=ParentKind.group:label-key, for example Project.resourcemanager.miloapis.com=Organization.resourcemanager.miloapis.com:%s", s, rmv1alpha1.OrganizationNameLabel)
	}
	gk := func(s string) quota.GroupKind {
		k, g, _ := strings.Cut(s, ".")
		return quota.GroupKind{Group: g, Kind: k}
	}
	return ParentRelation{Child: gk(child), Parent: gk(parent), Label: label}, nil
}

// Consumers is told each consumer's parent and labels.
type Consumers interface {
	SetConsumer(quota.ConsumerID, quota.ConsumerInfo)
	RemoveConsumer(quota.ConsumerID)
}

// KindWatcher is told, before any of its objects, each kind Watch watches.
type KindWatcher interface {
	Watching(quota.GroupKind)
}

// Watch tells consumers every consumer's parent and labels, from metadata
// watches of the kinds the parent relations name and of the kinds also
// names, until ctx is done. The caller waits for the returned syncs before
// its first decision: deciding a project's claim before its organization is
// known would skip the organization's limit.
func Watch(ctx context.Context, relations []ParentRelation, also []quota.GroupKind, disco discovery.DiscoveryInterface, md metadata.Interface, consumers Consumers) ([]cache.InformerSynced, error) {
	kinds := map[quota.GroupKind]string{} // kind → label naming its parent ("" at the top)
	for _, rel := range relations {
		kinds[rel.Child] = rel.Label
		if _, ok := kinds[rel.Parent]; !ok {
			kinds[rel.Parent] = ""
		}
	}
	for _, gk := range also {
		if _, ok := kinds[gk]; !ok {
			kinds[gk] = ""
		}
	}
	parentOf := map[quota.GroupKind]quota.GroupKind{}
	for _, rel := range relations {
		parentOf[rel.Child] = rel.Parent
	}
	var synced []cache.InformerSynced
	for gk, label := range kinds {
		gvr, served, err := resourceOf(disco, gk)
		if err != nil {
			return nil, err
		}
		if !served {
			klog.FromContext(ctx).V(1).Info("A consumer kind of the hierarchy is not served; its consumers have no parent", "kind", gk)
			continue
		}
		if w, ok := consumers.(KindWatcher); ok {
			w.Watching(gk)
		}
		inf := reconcile.LeanInformer(metadatainformer.NewFilteredMetadataInformer(md, gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer())
		set := func(obj any) {
			m, err := reconcile.Meta(obj)
			if err != nil {
				return
			}
			info := quota.ConsumerInfo{Labels: m.GetLabels()}
			if label != "" {
				if p := m.GetLabels()[label]; p != "" {
					pk := parentOf[gk]
					info.Parent = &quota.ConsumerID{APIGroup: pk.Group, Kind: pk.Kind, Name: p}
				}
			}
			id := quota.ConsumerID{APIGroup: gk.Group, Kind: gk.Kind, Namespace: m.GetNamespace(), Name: m.GetName()}
			consumers.SetConsumer(id, info)
		}
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    set,
			UpdateFunc: func(_, obj any) { set(obj) },
			DeleteFunc: func(obj any) {
				m, err := reconcile.Meta(obj)
				if err != nil {
					return
				}
				consumers.RemoveConsumer(quota.ConsumerID{APIGroup: gk.Group, Kind: gk.Kind, Namespace: m.GetNamespace(), Name: m.GetName()})
			},
		})
		if err != nil {
			return nil, err
		}
		synced = append(synced, reg.HasSynced)
		go inf.RunWithContext(ctx)
	}
	return synced, nil
}

// resourceOf finds the resource of a kind, and whether it is served.
func resourceOf(disco discovery.DiscoveryInterface, gk quota.GroupKind) (schema.GroupVersionResource, bool, error) {
	groups, err := disco.ServerGroups()
	if err != nil {
		return schema.GroupVersionResource{}, false, fmt.Errorf("discovering the API groups: %w", err)
	}
	for _, g := range groups.Groups {
		if g.Name != gk.Group {
			continue
		}
		gv := g.PreferredVersion.GroupVersion
		list, err := disco.ServerResourcesForGroupVersion(gv)
		if apierrors.IsNotFound(err) {
			return schema.GroupVersionResource{}, false, nil
		} else if err != nil {
			return schema.GroupVersionResource{}, false, fmt.Errorf("discovering %s: %w", gv, err)
		}
		for _, r := range list.APIResources {
			if r.Kind == gk.Kind && !strings.Contains(r.Name, "/") {
				return schema.GroupVersionResource{Group: gk.Group, Version: g.PreferredVersion.Version, Resource: r.Name}, true, nil
			}
		}
	}
	return schema.GroupVersionResource{}, false, nil
}
