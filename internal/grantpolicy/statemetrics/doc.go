// Package statemetrics writes the seed's GrantCreationPolicy state metrics
// (milo_quota_grant_policy_info, _status_condition, _enabled,
// _observed_generation, _current_generation), exported by the replica that
// leads the grant engine (its Lease may be held by another replica than the
// quota engine's), from that term's informer cache.
//
// It only reads the cache it is given: it must never list from the API
// server, write an object, or show policies while this replica does not
// lead.
package statemetrics
