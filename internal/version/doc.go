// Package version reports the version of the quotaplane binary.
package version
