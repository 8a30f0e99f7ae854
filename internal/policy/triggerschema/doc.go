// Package triggerschema finds the OpenAPI schema of a policy's trigger kind
// as the API server serves it (built-in kinds and CRDs alike, from its
// OpenAPI v3 documents), so that policy expressions can be typed and their
// cost estimated. It caches what it finds for a short time; it never writes.
package triggerschema
