// Package inforcetest makes, for tests, the ClaimCreationPolicies an
// inforce.Index reads and the dynamic client it reads them from. Only tests
// import it.
package inforcetest
