package portal

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// Overview is the staff view's table: every organization, closest to a
// limit first.
type Overview struct {
	Total         int           `json:"total"`
	ResourceTypes []string      `json:"resourceTypes"`
	Organizations []OrgOverview `json:"organizations"`
	// Others are the consumers outside any organization (Namespaces, and
	// any other kind whose buckets live in the system namespace), closest
	// to a limit first; Kind is set on each.
	Others []OrgOverview `json:"others"`
}

// OrgOverview is one organization's row.
type OrgOverview struct {
	// Kind is the consumer's kind for Others ("" for an organization).
	Kind            string       `json:"kind,omitempty"`
	Name            string       `json:"name"`
	Type            string       `json:"type,omitempty"`
	Buckets         int          `json:"buckets"`
	PendingRequests int          `json:"pendingRequests"`
	Worst           *WorstBucket `json:"worst,omitempty"`
	FullIn          string       `json:"fullIn,omitempty"`
	FullInSeconds   *int64       `json:"fullInSeconds"`
}

// WorstBucket is the organization's bucket closest to its limit.
type WorstBucket struct {
	ConsumerKind string `json:"consumerKind"`
	ConsumerName string `json:"consumerName"`
	ResourceType string `json:"resourceType"`
	Limit        int64  `json:"limit"`
	Allocated    int64  `json:"allocated"`
	Available    int64  `json:"available"`
	// Percent is allocated as a whole percent of limit, rounded down (above
	// 100 over the limit), as the bucket's status.usedPercent; absent when
	// the limit is 0: no amount is a percent of 0.
	Percent *int32 `json:"percent,omitempty"`
	// OverLimit: allocated exceeds the limit (2 used of a limit of 0 is).
	OverLimit bool `json:"overLimit,omitempty"`
}

// OverviewQuery filters the overview.
type OverviewQuery struct {
	// ResourceType, when set, considers only its buckets.
	ResourceType string
	// Organization, when set, keeps organizations whose name contains it.
	Organization string
	// Limit is how many rows to return (the total is counted anyway).
	Limit int
}

// worstBucket is what the overview says of one bucket: how full it is, as
// the engine computes it (quota.BucketStatus), never a percent invented for
// a limit of 0.
func worstBucket(b *quotav1alpha1.AllowanceBucket) *WorstBucket {
	st := quota.BucketStatus{Limit: b.Status.Limit, Allocated: b.Status.Allocated}
	w := &WorstBucket{ConsumerKind: b.Spec.ConsumerRef.Kind, ConsumerName: b.Spec.ConsumerRef.Name, ResourceType: string(b.Spec.ResourceType),
		Limit: b.Status.Limit, Allocated: b.Status.Allocated, Available: b.Status.Available, OverLimit: st.OverLimit()}
	if pct, ok := st.UsedPercent(); ok {
		w.Percent = &pct
	}
	return w
}

// fullness orders buckets from the fullest: by used percent, and a bucket
// using anything of a limit of 0 above every percent (it is over its limit
// by more than any finite ratio); -1 for none.
func fullness(w *WorstBucket) int64 {
	switch {
	case w == nil:
		return -1
	case w.Percent != nil:
		return int64(*w.Percent)
	case w.OverLimit:
		return math.MaxInt64
	}
	return 0
}

// BuildOverview groups buckets by organization (an organization's and its
// projects' buckets live in its namespace), and sorts organizations by their
// fullest bucket, then by the soonest estimated exhaustion, then by name.
func BuildOverview(buckets []*quotav1alpha1.AllowanceBucket, orgTypes map[string]string, pending map[string]int, q OverviewQuery, now time.Time) Overview {
	rows := map[string]*OrgOverview{}
	others := map[string]*OrgOverview{}
	types := map[string]bool{}
	for _, b := range buckets {
		if b.Labels[quotav1alpha1.LabelProjectedFrom] != "" {
			continue
		}
		org, ok := strings.CutPrefix(b.Namespace, rmv1alpha1.OrganizationNamespacePrefix)
		into := rows
		if !ok {
			// Outside any organization: the consumer is its own row.
			c := b.Spec.ConsumerRef
			if c.Kind == "" || c.Name == "" {
				continue
			}
			org, into = c.Kind+"/"+c.Name, others
		}
		rt := string(b.Spec.ResourceType)
		types[rt] = true
		if q.ResourceType != "" && rt != q.ResourceType {
			continue
		}
		if q.Organization != "" && !strings.Contains(org, q.Organization) {
			continue
		}
		row := into[org]
		if row == nil {
			row = &OrgOverview{Name: org, Type: orgTypes[org], PendingRequests: pending[org]}
			if !ok {
				row.Kind, row.Name, row.Type, row.PendingRequests = b.Spec.ConsumerRef.Kind, b.Spec.ConsumerRef.Name, "", 0
			}
			into[org] = row
		}
		row.Buckets++
		st := b.Status
		if w := worstBucket(b); row.Worst == nil || fullness(w) > fullness(row.Worst) {
			row.Worst = w
		}
		if st.EstimatedFullAt != nil {
			secs := max(0, int64(st.EstimatedFullAt.Sub(now).Seconds()))
			if row.FullInSeconds == nil || secs < *row.FullInSeconds {
				row.FullInSeconds, row.FullIn = &secs, st.FullIn
			}
		}
	}
	out := Overview{Total: len(rows), ResourceTypes: make([]string, 0, len(types)), Organizations: make([]OrgOverview, 0, len(rows)),
		Others: make([]OrgOverview, 0, len(others))}
	for _, r := range others {
		out.Others = append(out.Others, *r)
	}
	slices.SortFunc(out.Others, compareRows)
	if q.Limit > 0 && len(out.Others) > q.Limit {
		out.Others = out.Others[:q.Limit]
	}
	for t := range types {
		out.ResourceTypes = append(out.ResourceTypes, t)
	}
	slices.Sort(out.ResourceTypes)
	for _, r := range rows {
		out.Organizations = append(out.Organizations, *r)
	}
	slices.SortFunc(out.Organizations, compareRows)
	if q.Limit > 0 && len(out.Organizations) > q.Limit {
		out.Organizations = out.Organizations[:q.Limit]
	}
	return out
}

func compareRows(a, b OrgOverview) int {
	if c := cmp.Compare(fullness(b.Worst), fullness(a.Worst)); c != 0 {
		return c
	}
	switch {
	case a.FullInSeconds != nil && b.FullInSeconds == nil:
		return -1
	case a.FullInSeconds == nil && b.FullInSeconds != nil:
		return 1
	case a.FullInSeconds != nil && *a.FullInSeconds != *b.FullInSeconds:
		if *a.FullInSeconds < *b.FullInSeconds {
			return -1
		}
		return 1
	}
	return strings.Compare(a.Name, b.Name)
}
