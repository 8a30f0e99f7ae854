// Package refusal words the answer quotaplane gives when quota refuses an
// object: which resource type ran out, for which consumer, how much was
// asked, what is available of which limit, and where to ask for more. The
// same words come from admission (a create or an update refused) and from a
// QuotaReview (an object it would refuse), so a what-if and the real apply
// never disagree. It formats only: it decides nothing and reads nothing.
package refusal
