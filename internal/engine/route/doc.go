// Package route takes a decision to where it is made: this replica's
// engine when it leads (a Decider, internal/engine/admit's Term), the
// leader otherwise (a Forwarder, internal/peer). It holds the questions and
// answers every way in uses (AdmitResult, PolicyChange, ReviewStep, …), the
// record of what one request was granted (RequestGrants) and how it ended,
// and, on the leader, the sessions of the requests other replicas
// forwarded.
//
// It decides nothing and never reads the cache: internal/engine/admit
// does. internal/charge asks it; internal/peer implements its Forwarder
// and answers a follower's calls through the leader's Handle. Neither of
// them imports internal/engine/admit.
package route
