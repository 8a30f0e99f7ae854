// Package convert turns the quota API's objects into the values the pure
// arithmetic of internal/quota works on. The engine and quotaplane verify
// both use it, so that verify rebuilds exactly what the engine computes.
package convert
