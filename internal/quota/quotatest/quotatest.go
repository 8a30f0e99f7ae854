package quotatest

import (
	"time"

	"github.com/quotaplane/quotaplane/internal/quota"
)

// VCPU is a resource type charged to projects and, in the tests of
// hierarchies, to their organizations.
const VCPU = "compute.example.com/vcpu"

// Org is the organization acme.
func Org() quota.ConsumerID {
	return quota.ConsumerID{APIGroup: quota.OrganizationGroup, Kind: "Organization", Name: "acme"}
}

// OrgKind is the kind of organizations.
func OrgKind() quota.GroupKind { return Org().GroupKind() }

// ProjectKind is the kind of projects.
func ProjectKind() quota.GroupKind { return Project("").GroupKind() }

// Project is the project of that name.
func Project(name string) quota.ConsumerID {
	return quota.ConsumerID{APIGroup: quota.OrganizationGroup, Kind: "Project", Name: name}
}

// Created is when the tests' objects were created.
func Created() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
