// Package journalkeys names what quotaplane serve keeps in its etcd beside
// the API's objects — admission's grants in flight, budget holds and its
// fail-open records —
// and the file in serve's data directory that says which etcd that is.
//
// It is shared by the writers (the engine, admission, serve) and the reader
// (quotaplane verify), and holds names and formats only: no client, no I/O
// beyond that one file.
package journalkeys
