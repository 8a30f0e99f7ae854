package verify

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// claimFrom is the claim internal/quota sees for a spec recorded elsewhere
// than in a stored claim (admission's journal, a policy's rendering).
func claimFrom(uid, ns, name string, created time.Time, spec quotav1alpha1.ResourceClaimSpec) quota.Claim {
	return convert.Claim(&quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Namespace: ns, Name: name,
		CreationTimestamp: metav1.NewTime(created)}, Spec: spec})
}

// describeRequests is "1 example.com/things, 2 example.com/cpus (region=x)".
func describeRequests(reqs []quota.Request) string {
	parts := make([]string, len(reqs))
	for i, r := range reqs {
		parts[i] = fmt.Sprintf("%d %s", r.Amount, r.ResourceType)
		if k := r.Dims.Key(); k != "" {
			parts[i] += " (" + k + ")"
		}
	}
	return strings.Join(parts, ", ")
}

func describeBucket(id quota.BucketID) string {
	s := fmt.Sprintf("%s, %s", id.Consumer, id.ResourceType)
	if id.Dims != "" {
		s += " (" + id.Dims + ")"
	}
	return s
}

func kindName(kind, ns, name string) string {
	return kind + " " + nsName(ns, name)
}
