// Package quotatest holds the fixtures the tests of the quota arithmetic
// (packages accounting and bookkeeping) share: an organization and its
// projects, their kinds, a resource type and a creation time, so that each is
// written once.
//
// Only tests import it. It holds no state: every fixture is a constant or a
// function returning a fresh value.
package quotatest
