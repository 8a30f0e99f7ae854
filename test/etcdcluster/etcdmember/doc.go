// Command etcdmember runs one member of an etcd cluster on loopback, for
// tests that need etcd members as separate processes (three members, one
// killed, the leader killed, a snapshot restored): etcd 3.6's embed package,
// the same etcd serve embeds.
package main
