// Package existing charges the objects that already exist when a version of
// a ClaimCreationPolicy comes into force — created while it was disabled,
// before it was created, or before an edit widened its trigger — as
// Kubernetes' own ResourceQuota counts what exists the moment it is created:
// at the root and in every served control plane.
// Their claims are granted even beyond the limit (the objects exist); the
// policy's status.existingObjects and an Event say how many were charged and
// how many put a bucket over its limit. docs/exactly-once.md, "Existing
// objects", has the argument.
package existing
