// Package etcdmember runs one member of an etcd cluster in process: what
// `quotaplane etcd` runs, so that the image and the chart need no etcd of
// their own. The flags are etcd's, by the same names and meaning, for the
// settings a quota plane's cluster needs (docs/operations.md).
package etcdmember
