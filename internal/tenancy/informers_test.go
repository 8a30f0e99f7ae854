package tenancy

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/reconcile"
)

func labelled(org string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: "x", Labels: map[string]string{rmv1alpha1.OrganizationNameLabel: org}}
}

// TestEventKeys: which keys each change enqueues — an organization's own
// name, the organization a namespace or RBAC object is labelled with or a
// project names, the projects of an organization — for every state an
// event carries.
func TestEventKeys(t *testing.T) {
	projects := cacheOf(project("p1", "acme"), project("p2", "acme"), project("q", "globex")).projects
	orgProjects := func(obj any) []string { return projectsOf(projects, obj) }
	for name, tc := range map[string]struct {
		keys     func(obj any) []string
		add      any
		old, new any
		del      any
		want     []string
	}{
		"an organization is its own key": {
			keys: ownName, add: acme(), want: []string{"acme"},
		},
		"a labelled namespace enqueues its organization": {
			keys: organizationLabel, add: &corev1.Namespace{ObjectMeta: labelled("acme")}, want: []string{"acme"},
		},
		"a RoleBinding relabelled enqueues both organizations": {
			keys: organizationLabel,
			old:  &rbacv1.RoleBinding{ObjectMeta: labelled("acme")}, new: &rbacv1.RoleBinding{ObjectMeta: labelled("globex")},
			want: []string{"acme", "globex"},
		},
		"a ClusterRoleBinding deleted unseen enqueues its organization": {
			keys: organizationLabel,
			del:  toolscache.DeletedFinalStateUnknown{Key: "x", Obj: &rbacv1.ClusterRoleBinding{ObjectMeta: labelled("acme")}},
			want: []string{"acme"},
		},
		"an unlabelled ClusterRole enqueues nothing": {
			keys: organizationLabel, add: &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "x"}},
		},
		"a project enqueues the organization it names": {
			keys: ownerOrganization, del: project("p1", "acme"), want: []string{"acme"},
		},
		"an organization enqueues its projects": {
			keys: orgProjects, old: acme(), new: acme(deleted), want: []string{"p1", "p2"},
		},
		"a project is its own key": {
			keys: ownName, add: project("p1", "globex"), want: []string{"p1"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			q := reconcile.NewQueue[string](0, 0)
			defer q.ShutDown()
			h := enqueue(q, tc.keys)
			switch {
			case tc.add != nil:
				h.OnAdd(tc.add, false)
			case tc.del != nil:
				h.OnDelete(tc.del)
			default:
				h.OnUpdate(tc.old, tc.new)
			}
			var got []string
			for q.Len() > 0 {
				k, _ := q.Get()
				got = append(got, k)
				q.Done(k)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("keys enqueued (-want +got):\n%s", diff)
			}
		})
	}
}
