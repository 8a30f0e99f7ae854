package claimguard

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/members"
	"github.com/quotaplane/quotaplane/internal/planes"
)

// The decisions of the guard, on values: the plugin gathers the facts (the
// claims, where the object is and whether it is live, what the authorizer
// says) and these say yes or why not. Nothing here reads or writes.

// marks are the keys that say where a claim's object is stored: the
// control plane's annotation and the member cluster's label, each also
// under the other's kind (a label or an annotation of the same key), so that
// no copy of them can be written beside the engine's either.
var marks = []struct {
	key   string
	label bool
}{
	{planes.Annotation, false}, {planes.Annotation, true},
	{members.Label, true}, {members.Label, false},
}

// markChange says how an update adds, changes or removes a mark, or "".
// The marks are the engine's, written with the claim; nobody changes them.
func markChange(old, c *quotav1alpha1.ResourceClaim) string {
	for _, m := range marks {
		was, had := mapOf(old, m.label)[m.key]
		is, has := mapOf(c, m.label)[m.key]
		what := "annotation"
		if m.label {
			what = "label"
		}
		switch {
		case had && !has:
			return fmt.Sprintf("this update removes its %s %s=%s", what, m.key, was)
		case !had && has:
			return fmt.Sprintf("this update adds the %s %s=%s", what, m.key, is)
		case was != is:
			return fmt.Sprintf("this update changes its %s %s from %s to %s", what, m.key, was, is)
		}
	}
	return ""
}

func mapOf(c *quotav1alpha1.ResourceClaim, label bool) map[string]string {
	if label {
		return c.Labels
	}
	return c.Annotations
}

// markRefusal is the refusal of an update that changes a mark.
func markRefusal(c *quotav1alpha1.ResourceClaim, change string) string {
	return fmt.Sprintf("updating ResourceClaim %s/%s is refused: %s; the annotation %s and the label %s say where the claim's object is stored (a control plane, a member cluster) "+
		"and are written only by the quota engine with the claim: nobody adds, changes or removes them. Leave them as they are; to release the claim, delete its object",
		c.Namespace, c.Name, change, planes.Annotation, members.Label)
}

// madeAtAdmission reports whether a claim was made for an object (by
// admission, or the engine charging an existing object): it names the
// object's UID.
func madeAtAdmission(c *quotav1alpha1.ResourceClaim) bool {
	return c != nil && c.Annotations[quotav1alpha1.AnnotationResourceUID] != ""
}

// objectAnnotations are the annotations that tie a claim to its object and
// its decision.
var objectAnnotations = []string{quotav1alpha1.AnnotationResourceUID, quotav1alpha1.AnnotationResource, quotav1alpha1.AnnotationPolicy,
	quotav1alpha1.AnnotationPolicyGeneration, quotav1alpha1.AnnotationGrantKey}

// cutFromObject says how an update cuts a claim from its object — what
// would let it be released, or counted for something else, while the
// object stays — or "".
func cutFromObject(old, c *quotav1alpha1.ResourceClaim) string {
	for _, k := range objectAnnotations {
		if old.Annotations[k] != c.Annotations[k] {
			return fmt.Sprintf("this update changes its annotation %s", k)
		}
	}
	switch {
	case !equality.Semantic.DeepEqual(old.Spec.ResourceRef, c.Spec.ResourceRef):
		return "this update changes its spec.resourceRef (the object it charges for)"
	case !equality.Semantic.DeepEqual(old.Spec.ConsumerRef, c.Spec.ConsumerRef):
		return "this update changes its spec.consumerRef"
	case !equality.Semantic.DeepEqual(old.Spec.Requests, c.Spec.Requests):
		return "this update changes its spec.requests"
	}
	if msg := ownerChange(old, c); msg != "" {
		return msg
	}
	if old.DeletionTimestamp != nil && !slices.Equal(old.Finalizers, c.Finalizers) {
		return "this update changes the finalizers of a claim being deleted (removing the last one would delete it)"
	}
	return ""
}

// ownerChange says how an update changes a claim's ownerReferences, or "".
// The engine writes them with the claim; a reference to the object removed
// lets the object's deletion orphan it, one changed or added can make the
// garbage collector take it.
func ownerChange(old, c *quotav1alpha1.ResourceClaim) string {
	if equality.Semantic.DeepEqual(old.OwnerReferences, c.OwnerReferences) || (len(old.OwnerReferences) == 0 && len(c.OwnerReferences) == 0) {
		return ""
	}
	uid := old.Annotations[quotav1alpha1.AnnotationResourceUID]
	had, has := -1, -1
	for i, o := range old.OwnerReferences {
		if string(o.UID) == uid {
			had = i
		}
	}
	for i, o := range c.OwnerReferences {
		if string(o.UID) == uid {
			has = i
		}
	}
	switch {
	case had >= 0 && has < 0:
		return "this update removes its ownerReference to that object (as kubectl delete --cascade=orphan would)"
	case had >= 0 && !equality.Semantic.DeepEqual(old.OwnerReferences[had], c.OwnerReferences[has]):
		return "this update changes its ownerReference to that object (the garbage collector would take the claim for an orphan)"
	}
	return "this update changes its ownerReferences (the garbage collector would delete the claim with another owner)"
}

// holder is what holds a claim made for an object, as looked up for one
// request.
type holder struct {
	// cluster is the member cluster the object is stored in; the quota
	// plane cannot look it up, and the cluster's webhook releases it.
	cluster string
	// plane is the control plane the object is stored in ("projects/x"),
	// "" at the root.
	plane string
	// live: an object of the claim's UID is stored and not being deleted.
	live bool
}

// where is where the object is stored, in words.
func (h holder) where() string {
	if h.plane == "" {
		return "at the root"
	}
	return "in control plane " + h.plane
}

// access is the authorizer's answer for one question.
type access struct {
	allowed bool
	reason  string
}

// releaseRefusal is why what (deleting, or "updating" with how it cuts)
// claim c, held by h, is refused; "" when it is allowed. release is the
// authorizer's answer to "may the requester release h.cluster's claims",
// asked only for a member cluster's claim.
func releaseRefusal(what string, c *quotav1alpha1.ResourceClaim, h holder, release access, user string) string {
	if h.cluster != "" {
		if release.allowed {
			return ""
		}
		reason := ""
		if release.reason != "" {
			reason = " (" + release.reason + ")"
		}
		return fmt.Sprintf("%s ResourceClaim %s/%s is refused: it holds the quota of %s in member cluster %s, which the quota plane cannot look up; "+
			"only that cluster's webhook releases it, and user %q may not: it needs verb %q on %s.%s named %s in namespace %s%s. "+
			"Delete the object in cluster %s (its webhook releases the claim), or bind ClusterRole quotaplane-member-cluster to the cluster's webhook in namespace %s (docs/clusters.md)",
			what, c.Namespace, c.Name, objectName(c), h.cluster, user, members.VerbRelease, members.Resource, quotav1alpha1.GroupName,
			h.cluster, members.Namespace(h.cluster), reason, h.cluster, members.Namespace(h.cluster))
	}
	if !h.live {
		return ""
	}
	return fmt.Sprintf("%s ResourceClaim %s/%s is refused: it holds the quota of %s, which is still stored %s; "+
		"nobody, the platform's controllers included, removes or cuts the claim of a stored object: delete that object to release its quota (its claim is released with it)",
		what, c.Namespace, c.Name, objectName(c), h.where())
}

// createMarkRefusal is why creating claim c through the API is refused
// for its marks, "" when it is not. review is the authorizer's answer to
// "may the creator speak for the member cluster c is labelled with", asked
// only for a labelled claim.
func createMarkRefusal(c *quotav1alpha1.ResourceClaim, review access, user string) string {
	if v, ok := c.Annotations[planes.Annotation]; ok {
		if _, err := planes.Parse(v); err != nil {
			return fmt.Sprintf("creating ResourceClaim %s/%s is refused: its annotation %s: %v", c.Namespace, c.Name, planes.Annotation, err)
		}
	}
	cluster, ok := c.Labels[members.Label]
	if !ok || review.allowed {
		return ""
	}
	return fmt.Sprintf("creating ResourceClaim %s/%s is refused: its label %s=%s says its object is stored in member cluster %s, whose claims only that cluster's webhook may make and release, "+
		"and user %q may not speak for it (verb %q on %s.%s named %s in namespace %s). Remove the label: a claim made through the API charges an object of the quota plane, or none",
		c.Namespace, c.Name, members.Label, cluster, cluster, user, members.VerbReview, members.Resource, quotav1alpha1.GroupName, cluster, members.Namespace(cluster))
}

// objectName is the object a claim was made for, in words.
func objectName(c *quotav1alpha1.ResourceClaim) string {
	ref := c.Spec.ResourceRef
	if ref == nil {
		return "its object"
	}
	name := ref.Name
	if ref.Namespace != "" {
		name = ref.Namespace + "/" + ref.Name
	}
	return fmt.Sprintf("%s %s (uid %s)", ref.Kind, name, c.Annotations[quotav1alpha1.AnnotationResourceUID])
}

// elsewhere reports whether a claim's object lives outside the claim's
// namespace (in another namespace, cluster-scoped, in a control plane or
// in a member cluster): deleting the claim's namespace does not delete it.
func elsewhere(c *quotav1alpha1.ResourceClaim) bool {
	ref := c.Spec.ResourceRef
	if c.Annotations[planes.Annotation] != "" || c.Labels[members.Label] != "" {
		return true
	}
	return ref != nil && ref.Namespace != c.Namespace
}
