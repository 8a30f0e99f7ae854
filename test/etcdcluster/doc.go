// Package etcdcluster runs an etcd cluster whose members are separate
// processes on loopback (the etcdmember command, etcd 3.6's embed package),
// for tests of serve replicas on several etcd members: a member killed, the
// etcd leader killed, a snapshot taken and the cluster restored from it.
package etcdcluster
