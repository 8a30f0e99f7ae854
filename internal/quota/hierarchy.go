package quota

// Identities of a hierarchy of quota: what is known of a consumer object
// (its parent and labels) and the identity of a group grant's buckets. How
// a claim draws from every level is accounting's (package accounting).

// ConsumerInfo is what the engine knows of a consumer object.
type ConsumerInfo struct {
	// Parent is the consumer one level up, nil at the top.
	Parent *ConsumerID
	// Labels are the consumer's labels, which groups select on.
	Labels map[string]string
}

// GroupAPIGroup and GroupKindName identify a group in a bucket's consumer:
// a group is its ResourceGrant.
const (
	GroupAPIGroup = "quota.miloapis.com"
	GroupKindName = "ResourceGrant"
)

// GroupID is the consumer identity of a group grant's buckets.
func GroupID(namespace, name string) ConsumerID {
	return ConsumerID{APIGroup: GroupAPIGroup, Kind: GroupKindName, Namespace: namespace, Name: name}
}

// IsGroup reports whether a consumer identity is a group's.
func (c ConsumerID) IsGroup() bool { return c.APIGroup == GroupAPIGroup && c.Kind == GroupKindName }

// LevelName is how messages name a level: "Project web", "group team-data".
func (c ConsumerID) LevelName() string {
	if c.IsGroup() {
		return "group " + c.Name
	}
	return c.Kind + " " + c.Name
}
