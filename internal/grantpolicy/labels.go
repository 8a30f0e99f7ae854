package grantpolicy

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Labels and annotations on every grant a GrantCreationPolicy makes. The
// labels find the grants of a policy and of one trigger object
// (kubectl get resourcegrants -l quota.miloapis.com/grant-policy=<name>);
// values longer than a label allows are shortened with a hash (labelValue).
// The annotations keep the full names, and the UID of the trigger object
// the grant was last rendered from.
const (
	LabelPolicy           = "quota.miloapis.com/grant-policy"
	LabelTriggerKind      = "quota.miloapis.com/trigger-kind"
	LabelTriggerName      = "quota.miloapis.com/trigger-name"
	LabelTriggerNamespace = "quota.miloapis.com/trigger-namespace"

	AnnotationTriggerUID       = "quota.miloapis.com/trigger-uid"
	AnnotationPolicy           = "quota.miloapis.com/grant-policy"
	AnnotationTriggerName      = "quota.miloapis.com/trigger-name"
	AnnotationTriggerNamespace = "quota.miloapis.com/trigger-namespace"

	// Finalizer holds a deleted GrantCreationPolicy until every grant it
	// made is deleted, also when the grant engine was not running at the
	// time of the delete.
	Finalizer = "quota.miloapis.com/grant-policy-cleanup"
)

// labelValue returns s when it is a valid label value; otherwise a prefix
// of s and a hash of all of it, 63 characters at most, so that distinct
// values stay distinct.
func labelValue(s string) string {
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

// key names one trigger object of one policy, the unit of reconciliation.
// A key with an empty name is the policy itself.
type key struct {
	policy    string
	namespace string
	name      string
}

func policyKey(name string) key { return key{policy: name} }

func (k key) isPolicy() bool { return k.name == "" }

// triggerIndexValue is the grant index value of the grants made for one
// trigger object by one policy, computed from the labels. The kind is left
// out: a policy has one trigger kind at a time, and the grants it made for
// objects of a kind it no longer watches must still be found (and deleted).
func triggerIndexValue(policy, namespace, name string) string {
	return labelValue(policy) + "/" + labelValue(namespace) + "/" + labelValue(name)
}

// ownLabels are the labels the engine sets on a grant of policy for the
// trigger object.
func ownLabels(policy, kind, namespace, name string) map[string]string {
	l := map[string]string{
		LabelPolicy:      labelValue(policy),
		LabelTriggerKind: kind,
		LabelTriggerName: labelValue(name),
	}
	if namespace != "" {
		l[LabelTriggerNamespace] = labelValue(namespace)
	}
	return l
}

func ownAnnotations(policy, namespace, name, uid string) map[string]string {
	a := map[string]string{
		AnnotationPolicy:      policy,
		AnnotationTriggerName: name,
		AnnotationTriggerUID:  uid,
	}
	if namespace != "" {
		a[AnnotationTriggerNamespace] = namespace
	}
	return a
}
