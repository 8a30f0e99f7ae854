// Command quotaplane is the quota control plane: one binary that serves the
// quota API with embedded etcd, or runs the quota controllers against another
// cluster.
package main
