package render

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// LabelValue returns s when it is a valid label value; otherwise a prefix
// of s and a hash of all of it, 63 characters at most, so that distinct
// values stay distinct.
func LabelValue(s string) string {
	if len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:])[:16]
	prefix := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, s)
	if len(prefix) > 46 {
		prefix = prefix[:46]
	}
	prefix = strings.TrimLeft(prefix, "-_.")
	if prefix == "" {
		return h
	}
	return prefix + "-" + h
}

// TriggerIndexValue is the grant index value of the grants made for one
// trigger object by one policy, computed from the labels. The kind is left
// out: a policy has one trigger kind at a time, and the grants it made for
// objects of a kind it no longer watches must still be found (and deleted).
func TriggerIndexValue(policy, namespace, name string) string {
	return LabelValue(policy) + "/" + LabelValue(namespace) + "/" + LabelValue(name)
}

// OwnLabels are the labels the engine sets on a grant of policy for the
// trigger object.
func OwnLabels(policy, kind, namespace, name string) map[string]string {
	l := map[string]string{
		quotav1alpha1.GrantPolicyLabel:            LabelValue(policy),
		quotav1alpha1.LabelPolicy:                 LabelValue(policy),
		quotav1alpha1.GrantPolicyLabelTriggerKind: kind,
		quotav1alpha1.GrantPolicyLabelTriggerName: LabelValue(name),
	}
	if namespace != "" {
		l[quotav1alpha1.GrantPolicyLabelTriggerNamespace] = LabelValue(namespace)
	}
	return l
}

// OwnAnnotations are the annotations the engine sets on a grant of policy
// for the trigger object whose UID is uid.
func OwnAnnotations(policy, namespace, name, uid string) map[string]string {
	a := map[string]string{
		quotav1alpha1.GrantPolicyAnnotation:            policy,
		quotav1alpha1.GrantPolicyAnnotationTriggerName: name,
		quotav1alpha1.GrantPolicyAnnotationTriggerUID:  uid,
	}
	if namespace != "" {
		a[quotav1alpha1.GrantPolicyAnnotationTriggerNamespace] = namespace
	}
	return a
}
