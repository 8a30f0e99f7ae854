// Package etcdflags owns the flags that say how to reach quotaplane's etcd
// (--etcd-servers, --etcd-prefix, --etcd-cafile, --etcd-certfile,
// --etcd-keyfile): their names, defaults and help, and the checks every
// command makes of them. quotaplane serve and quotaplane verify embed its
// Etcd in their options.
//
// It only parses and checks values; it never reads the files it is given and
// never connects to etcd.
package etcdflags
