// Package registration is an admission plugin of quotaplane serve that refuses
// a ResourceRegistration whose resourceType is already registered, naming the
// registration that holds it. It only reads registrations; the engine still
// marks a duplicate that slipped through (two concurrent creates) inactive.
package registration
