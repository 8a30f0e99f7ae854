// Package testserver starts the real quotaplane server in-process — the same
// assembly `quotaplane serve` uses — on a free loopback port in a temporary
// data directory, and tears it down in order (API server, then etcd).
//
// Use one server per test package, started from TestMain.
package testserver
