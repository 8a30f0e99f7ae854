// Package manifests holds quota manifests in the seed documents' field names,
// shared by the integration and end-to-end tests.
package manifests
