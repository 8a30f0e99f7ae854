// Package fieldcheck judges which fields of `trigger` a policy's checked
// CEL expression reads against the trigger kind's served schemas: a field
// no served version declares is named with the nearest real one, as
// Kubernetes' ValidatingAdmissionPolicy type-checks (docs/admission.md).
package fieldcheck
