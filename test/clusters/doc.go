// Package clusters runs quotaplane across clusters the way a platform does:
// three `quotaplane serve` processes — the quota plane and two member
// clusters — with `quotaplane webhook` registered in each member, and shows
// that one global quota holds across them (docs/clusters.md).
package clusters
