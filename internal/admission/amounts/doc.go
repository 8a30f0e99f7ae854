// Package amounts is an admission plugin of quotaplane serve that gives
// grants, claims and grant templates one unit story with claim policies: an
// amount may be written as an integer in base units or as a Kubernetes
// quantity ("16Gi") that is a whole number of base units of a registration
// declaring spec.baseUnitQuantity. The quantity is converted exactly, before
// the object is validated and stored, so what is stored — and what clients
// of the reference implementation read — is always the integer. An amount
// that cannot be converted, or is below its minimum, is refused on its exact
// field path; nothing is rounded. It only reads registrations.
package amounts
