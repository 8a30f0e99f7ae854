// Package settle ends what admission began. A create's grant, held under a
// provisional ID, becomes its claim (written decided and owned by its object,
// replacing the journal entry in one fenced transaction) once the object is
// stored; an update's new claim replaces the old ones once the update is
// stored; either is released when its object was not stored. Without a
// report from the request it looks the object up, and waits until the
// request can no longer be writing. It settles delegated grants' budget
// holds, and ObjectWatch deletes claims whose objects are gone when the
// garbage collector cannot (no valid ownerReference).
//
// It never decides: every amount it writes was decided at admission.
package settle
