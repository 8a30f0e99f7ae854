package portal

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/history"
	"github.com/quotaplane/quotaplane/internal/requests"
)

// maxOrganizations bounds the organizations whoami checks for a tenant.
const maxOrganizations = 50

func (p *Portal) whoami(w http.ResponseWriter, r *http.Request, id *identity) {
	orgs := []string{}
	if !id.staff {
		for _, org := range p.candidateOrganizations(id) {
			if ok, err := id.allowed(r.Context(), "list", "allowancebuckets", rmv1alpha1.OrganizationNamespace(org)); err == nil && ok {
				orgs = append(orgs, org)
			}
		}
	}
	writeJSON(w, map[string]any{"user": id.user, "groups": id.groups, "staff": id.staff, "organizations": orgs})
}

// candidateOrganizations are the organizations in whose namespace a
// RoleBinding names the user or one of its groups; whoami then asks the
// API server about each.
func (p *Portal) candidateOrganizations(id *identity) []string {
	seen := map[string]bool{}
	for _, o := range p.roleBindings.GetStore().List() {
		rb := o.(*rbacv1.RoleBinding)
		org, ok := strings.CutPrefix(rb.Namespace, rmv1alpha1.OrganizationNamespacePrefix)
		if !ok || seen[org] {
			continue
		}
		for _, s := range rb.Subjects {
			if names(s, id) {
				seen[org] = true
				break
			}
		}
	}
	out := make([]string, 0, len(seen))
	for org := range seen {
		out = append(out, org)
	}
	slices.Sort(out)
	if len(out) > maxOrganizations {
		out = out[:maxOrganizations]
	}
	return out
}

func names(s rbacv1.Subject, id *identity) bool {
	switch s.Kind {
	case rbacv1.UserKind:
		return s.Name == id.user
	case rbacv1.ServiceAccountKind:
		return fmt.Sprintf("system:serviceaccount:%s:%s", s.Namespace, s.Name) == id.user
	case rbacv1.GroupKind:
		return slices.Contains(id.groups, s.Name)
	}
	return false
}

func (p *Portal) overview(w http.ResponseWriter, r *http.Request, id *identity) {
	if !id.staff {
		writeError(w, http.StatusForbidden, fmt.Sprintf("%s may not list AllowanceBuckets in every namespace, which the staff view needs: bind the quotaplane-quota-approver ClusterRole, or open your organization's page", id.user))
		return
	}
	q := OverviewQuery{ResourceType: r.URL.Query().Get("resourceType"), Organization: r.URL.Query().Get("organization"), Limit: 500}
	if n, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && n > 0 {
		q.Limit = n
	}
	var buckets []*quotav1alpha1.AllowanceBucket
	for _, o := range p.buckets.GetStore().List() {
		buckets = append(buckets, o.(*quotav1alpha1.AllowanceBucket))
	}
	types := map[string]string{}
	for _, o := range p.orgs.GetStore().List() {
		org := o.(*rmv1alpha1.Organization)
		types[org.Name] = string(org.Spec.Type)
	}
	pending := map[string]int{}
	for _, o := range p.requests.GetStore().List() {
		qr := o.(*quotav1alpha1.QuotaRequest)
		if qr.Status.State == "" || qr.Status.State == quotav1alpha1.QuotaRequestPending {
			pending[strings.TrimPrefix(qr.Namespace, rmv1alpha1.OrganizationNamespacePrefix)]++
		}
	}
	writeJSON(w, BuildOverview(buckets, types, pending, q, time.Now()))
}

// events streams "changed" while buckets or requests change, at most every
// 300 ms, for the staff view to fetch the overview again.
func (p *Portal) events(w http.ResponseWriter, r *http.Request, id *identity) {
	if !id.staff {
		writeError(w, http.StatusForbidden, fmt.Sprintf("%s may not list AllowanceBuckets in every namespace, which the staff view's events need", id.user))
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "this server cannot stream")
		return
	}
	ch := make(chan struct{}, 1)
	p.subsMu.Lock()
	p.subs[ch] = struct{}{}
	p.subsMu.Unlock()
	defer func() {
		p.subsMu.Lock()
		delete(p.subs, ch)
		p.subsMu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprint(w, ": watching buckets and requests\n\n")
	flusher.Flush()
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-p.done: // the server is stopping: do not hold its shutdown
			return
		case <-keepAlive.C:
			_, _ = fmt.Fprint(w, ": keep-alive\n\n")
		case <-ch:
			_, _ = fmt.Fprint(w, "data: changed\n\n")
			flusher.Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(300 * time.Millisecond):
			}
			continue
		}
		flusher.Flush()
	}
}

func (p *Portal) broadcast() {
	p.subsMu.Lock()
	defer p.subsMu.Unlock()
	for ch := range p.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Refusal is one refused request in an organization's history.
type Refusal struct {
	Time         time.Time `json:"time"`
	Consumer     string    `json:"consumer"`
	ResourceType string    `json:"resourceType,omitempty"`
	Object       string    `json:"object"`
	Message      string    `json:"message"`
}

// history answers an organization's recent refusals (its own and its
// projects'), to whoever may read its buckets.
func (p *Portal) history(w http.ResponseWriter, r *http.Request, id *identity) {
	org := r.URL.Query().Get("organization")
	if org == "" {
		writeError(w, http.StatusBadRequest, "name the organization: /portal/api/history?organization=<name>")
		return
	}
	if ok, err := id.allowed(r.Context(), "list", "allowancebuckets", rmv1alpha1.OrganizationNamespace(org)); err != nil || !ok {
		writeError(w, http.StatusForbidden, fmt.Sprintf("%s may not read the quota of organization %s (list allowancebuckets in %s): ask one of its owners to bind you",
			id.user, org, rmv1alpha1.OrganizationNamespace(org)))
		return
	}
	var out []Refusal
	for _, o := range p.histories.GetStore().List() {
		cm := o.(*corev1.ConfigMap)
		c := history.ConsumerOf(cm)
		if c.APIGroup != rmv1alpha1.GroupName || !(c.Kind == "Organization" && c.Name == org || c.Kind == "Project" && p.projectOrganization(c.Name) == org) {
			continue
		}
		entries, err := history.Decode(cm)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !e.IsRefusal() {
				continue
			}
			ref := Refusal{Time: e.Time, Consumer: c.Kind + "/" + c.Name, Object: e.Object.String(), Message: e.Message}
			if e.For != nil {
				ref.Object = e.For.String()
			}
			if len(e.Requests) > 0 {
				ref.ResourceType = e.Requests[0].ResourceType
			}
			out = append(out, ref)
		}
	}
	slices.SortFunc(out, func(a, b Refusal) int { return b.Time.Compare(a.Time) })
	if len(out) > 20 {
		out = out[:20]
	}
	writeJSON(w, map[string]any{"refusals": append([]Refusal{}, out...)})
}

func (p *Portal) projectOrganization(name string) string {
	o, ok, err := p.projects.GetStore().GetByKey(name)
	if err != nil || !ok {
		return ""
	}
	return requests.ProjectOrganization(o.(*rmv1alpha1.Project))
}

// locate answers the organization of a Project, for a request link that
// names only the project, to whoever may read that organization's quota.
// A project that does not exist and one the user may not read get the same
// answer, so that nobody learns which projects exist.
func (p *Portal) locate(w http.ResponseWriter, r *http.Request, id *identity) {
	name := r.URL.Query().Get("project")
	org := p.projectOrganization(name)
	ok := false
	if org != "" {
		allowed, err := id.allowed(r.Context(), "list", "allowancebuckets", rmv1alpha1.OrganizationNamespace(org))
		ok = err == nil && allowed
	}
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("project %q is not known to %s: check its name, or ask its organization's owners to bind you", name, id.user))
		return
	}
	writeJSON(w, map[string]string{"organization": org})
}
