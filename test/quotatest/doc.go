// Package quotatest builds quota worlds (registrations, grants, claims) for
// tests against a real server, and waits for the engine's decisions.
//
// It also waits for RBAC: the API server authorizes from an informer cache,
// so a test that creates a RoleBinding or ClusterRoleBinding and then acts
// as its subject first calls WaitAllowed (or WaitBound, WaitBoundOn;
// ServiceAccountToken does) with a client of every replica the subject will
// talk to. TestEveryFreshBindingIsWaitedFor fails a test under test/ or cmd/
// that binds someone without waiting after it, unless the function says why
// none is needed in a comment "// rbac: <reason>".
package quotatest
