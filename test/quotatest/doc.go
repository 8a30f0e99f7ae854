// Package quotatest builds quota worlds (registrations, grants, claims) for
// tests against a real server, and waits for the engine's decisions.
package quotatest
