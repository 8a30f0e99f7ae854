// Package peer lets a replica of quotaplane serve whose engine does not lead
// get its decisions from the replica whose engine does (docs/replicas.md).
//
// Each replica runs a peer listener: TLS on its own port, answering only
// client certificates of the peer CA that carry the Organization
// pki.PeerGroup. No API handler, plane or member-webhook path reaches it.
// Each replica announces the address of its listener in a Lease of its own;
// a follower finds the engine's leader by the engine's Lease and calls it.
package peer
