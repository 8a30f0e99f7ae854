// Package arrivals is the charging component's wait for what a create
// needs and that arrives a moment after it, or later in the same sync: a
// consumer the quota engine does not know yet (quota.ReasonConsumerNotKnown)
// and the grant a GrantCreationPolicy writes for a tenant just created.
// The engine is asked again, bounded; what does not exist yet is answered
// with a status clients retry (docs/tenancy.md "Applies in any order").
package arrivals
