package quota

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// ConsumerID identifies a consumer. It is the one representation of consumer
// identity: grants, claims and buckets are matched by comparing ConsumerIDs,
// never their fields separately.
type ConsumerID struct {
	APIGroup  string
	Kind      string
	Namespace string
	Name      string
}

// TypeString is "Kind.group" (or "Kind" for the core group).
func (c ConsumerID) TypeString() string { return groupKind(c.APIGroup, c.Kind) }

// GroupKind is the consumer's kind.
func (c ConsumerID) GroupKind() GroupKind { return GroupKind{Group: c.APIGroup, Kind: c.Kind} }

func (c ConsumerID) String() string {
	if c.Namespace != "" {
		return fmt.Sprintf("%s %s/%s", c.TypeString(), c.Namespace, c.Name)
	}
	return fmt.Sprintf("%s %s", c.TypeString(), c.Name)
}

func groupKind(group, kind string) string {
	if group == "" {
		return kind
	}
	return kind + "." + group
}

// GroupKind names a kind.
type GroupKind struct{ Group, Kind string }

func (g GroupKind) String() string { return groupKind(g.Group, g.Kind) }

// Dim is one dimension key/value pair.
type Dim struct{ Key, Value string }

// Dimensions is a set of dimension pairs in canonical (key-sorted) order.
type Dimensions []Dim

// NewDimensions returns the pairs in canonical order.
func NewDimensions(pairs ...Dim) Dimensions {
	if len(pairs) == 0 {
		return nil
	}
	d := append(Dimensions(nil), pairs...)
	sort.Slice(d, func(i, j int) bool { return d[i].Key < d[j].Key })
	return d
}

// Key is the canonical text of the set, "" when empty.
func (d Dimensions) Key() string {
	if len(d) == 0 {
		return ""
	}
	parts := make([]string, len(d))
	for i, p := range d {
		parts[i] = p.Key + "=" + p.Value
	}
	return strings.Join(parts, ",")
}

// SubsetOf reports whether every pair of d is among values. Both are canonical.
func (d Dimensions) SubsetOf(values Dimensions) bool {
	j := 0
	for _, p := range d {
		for j < len(values) && values[j].Key < p.Key {
			j++
		}
		if j == len(values) || values[j] != p {
			return false
		}
	}
	return true
}

// BucketID identifies an AllowanceBucket: one consumer, one resource type,
// one dimension set (Dims is Dimensions.Key()).
type BucketID struct {
	Consumer     ConsumerID
	ResourceType string
	Dims         string
}

var unsafeName = regexp.MustCompile(`[^a-z0-9-]+`)

// BucketName is the deterministic object name of a bucket, the reference
// implementation's: bucket-<hex sha256 of resource type, consumer kind and
// consumer name>, for every bucket without dimensions whose consumer is
// cluster scoped and of the core or the resourcemanager.miloapis.com group
// (those groups share no kind, so the three parts identify the bucket).
// Any other bucket's hash also covers the consumer's group and namespace
// and the dimensions, so distinct buckets never collide.
func BucketName(id BucketID) string {
	in := id.ResourceType + id.Consumer.Kind + id.Consumer.Name
	if id.Dims != "" || id.Consumer.Namespace != "" || (id.Consumer.APIGroup != "" && id.Consumer.APIGroup != OrganizationGroup) {
		in = strings.Join([]string{in, id.Consumer.APIGroup, id.Consumer.Namespace, id.Dims}, "\x00")
	}
	sum := sha256.Sum256([]byte(in))
	return "bucket-" + hex.EncodeToString(sum[:])
}

// IsBucketName reports whether name has the form BucketName gives:
// bucket-<64 hex digits>. No legacy name has it (a legacy name ends in a
// dash and 10 hex digits after at least two more dashes).
func IsBucketName(name string) bool {
	h, ok := strings.CutPrefix(name, "bucket-")
	if !ok || len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

// LegacyBucketName is the name quotaplane gave a bucket before it took the
// reference's names: <consumer kind>-<consumer name>-<resource>-<hash>. The
// engine renames a bucket stored under it, and labels every bucket with
// LegacyBucketLabelValue so that the old name still finds it.
func LegacyBucketName(id BucketID) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{id.Consumer.APIGroup, id.Consumer.Kind, id.Consumer.Namespace, id.Consumer.Name, id.ResourceType, id.Dims}, "\x00")))
	resource := id.ResourceType
	if i := strings.LastIndex(resource, "/"); i >= 0 {
		resource = resource[i+1:]
	}
	clean := func(s string, max int) string {
		s = strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(s), "-"), "-")
		if len(s) > max {
			s = strings.Trim(s[:max], "-")
		}
		return s
	}
	return fmt.Sprintf("%s-%s-%s-%s", clean(id.Consumer.Kind, 40), clean(id.Consumer.Name, 120), clean(resource, 60), hex.EncodeToString(sum[:5]))
}

// LegacyBucketLabelValue is the value of the quota.miloapis.com/legacy-name
// label: the legacy name when it fits a label value (63 characters), else
// its first characters and its hash, which alone tells buckets apart.
func LegacyBucketLabelValue(id BucketID) string {
	n := LegacyBucketName(id)
	if len(n) <= 63 {
		return n
	}
	hash := n[len(n)-10:]
	return strings.Trim(n[:52], "-") + "-" + hash
}

// Placement decides where a consumer's buckets live so that a tenant can
// read its own.
type Placement struct {
	// SystemNamespace holds the buckets of consumers that have no namespace
	// of their own.
	SystemNamespace string
	// OrganizationOf returns the organization of a Project, or "" when the
	// project is not known. Nil: projects are not known.
	OrganizationOf func(project string) string
}

// OrganizationGroup is the API group of the Organization and Project
// consumer kinds.
const OrganizationGroup = "resourcemanager.miloapis.com"

// OrganizationNamespace is the namespace of an organization: its grants,
// claims and buckets, and its projects' buckets.
func OrganizationNamespace(organization string) string { return "organization-" + organization }

// Namespace returns the namespace of a consumer's buckets: an Organization's
// are in organization-<name>; a Project's in its organization's namespace; a
// namespaced consumer's in its namespace; every other consumer's (a project
// not known) in the system namespace.
func (p Placement) Namespace(c ConsumerID) string {
	switch {
	case c.APIGroup == OrganizationGroup && c.Kind == "Organization":
		return OrganizationNamespace(c.Name)
	case c.APIGroup == OrganizationGroup && c.Kind == "Project" && c.Namespace == "" && p.OrganizationOf != nil:
		if org := p.OrganizationOf(c.Name); org != "" {
			return OrganizationNamespace(org)
		}
		return p.SystemNamespace
	case c.Namespace != "":
		return c.Namespace
	default:
		return p.SystemNamespace
	}
}
