// Package policystatus says what a GrantCreationPolicy's status says: its
// GrantsSynced condition (what holds grants back), its ParentContextReady
// condition (whether every trigger's parent context is found), and the
// write of the status with its Ready condition, and the Event a change of
// Ready records. It decides nothing about grants.
package policystatus
