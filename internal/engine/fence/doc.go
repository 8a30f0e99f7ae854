// Package fence makes the engine's decisions exactly-once across replicas and
// crashes (docs/exactly-once.md). It owns the ledger (a ConfigMap stamped with
// each leader's epoch, compare-and-swapped on every write), admission's
// journal (etcd transactions fenced by the ledger's revision), the Committer
// that batches both (group commit), and the Sealer that signs Granted
// decisions.
//
// A write through this package either lands under the current leader's epoch
// or fails with ErrDeposed; it never writes after another leader stamped the
// ledger. It keeps no quota state and makes no decision.
package fence
