// Package triggerwatch keeps the grant engine's watches of trigger kinds:
// one shared informer per kind, started when the first policy acquires the
// kind and stopped when the last one releases it.
//
// It only watches and notifies: it must never write to the API server,
// judge a policy or render a grant, and never keep a watch no policy uses.
package triggerwatch
