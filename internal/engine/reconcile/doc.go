// Package reconcile is the one worker loop of the engine's reconcilers: each
// owns a typed rate-limited workqueue of keys and a function that reconciles
// one key to the state it should have (level-based: it reads the whole state
// of its key, never the event that queued it). A failed key is retried with
// backoff. It keeps no state of its own.
package reconcile
