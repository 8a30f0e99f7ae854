// Package claimpolicy is the admission plugin of quotaplane serve that
// enforces ClaimCreationPolicies. It is the admission entry of the charging
// component (internal/charge): each create or update is charged there, in
// Admit mode, and the plugin gives the request the component's answer. It
// holds no step of its own.
package claimpolicy
