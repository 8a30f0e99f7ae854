// Package policycheck is an admission plugin of quotaplane serve that
// refuses, at create and at any update of their spec, the
// ClaimCreationPolicies and GrantCreationPolicies that can never work, as
// the reference implementation's validation does: templates that do not
// parse, literal names and namespaces that are not DNS names, a name and a
// generateName both set, a generateName without its trailing '-', CEL that
// does not compile or a constraint that does not return a bool, a segment
// that does not return a string. Each refusal names the exact field. What
// can only be judged later — a trigger kind not served yet, a resource type
// not registered yet, a field the trigger kind's schema lacks — is not
// refused here: the engine keeps such a policy Ready=False and says why
// (docs/conditions.md). It reads nothing but the request.
package policycheck
