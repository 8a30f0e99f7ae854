// Package standalone runs the quota engine and the tenancy controllers as a
// standalone process against another Kubernetes API server (quotaplane
// controller): it checks that the quota CRDs are installed, serves metrics
// and health, and runs them until stopped. It holds no quota logic.
package standalone
