// Package claims makes the ResourceClaim a ClaimCreationPolicy renders for
// one object — placed, named, labelled and annotated as documented, with
// the labels the reference implementation's clients read — and checks it as
// the API server would check its create. Admission and the engine's
// charging of existing objects make claims only through it.
package claims
