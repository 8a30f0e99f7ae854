// Package reconcile is the one worker loop of quotaplane's reconcilers (the
// quota engine's writers, the tenancy controllers): each owns a typed
// rate-limited workqueue of keys and a function that reconciles one key to
// the state it should have (level-based: it reads the whole state of its
// key, never the event that queued it). A failed key is retried with
// backoff; a reconcile may ask to look at its key again after a delay. It
// keeps no state of its own.
package reconcile
