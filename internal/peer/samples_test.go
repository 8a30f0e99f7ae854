package peer

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/history"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/quota/accounting"
)

// sample is one value of every engine type a peer message carries, each
// field set, so that a field lost or renamed on the wire shows.
type sample struct {
	claim    *quotav1alpha1.ResourceClaim
	grant    *quotav1alpha1.ResourceGrant
	object   route.ObjectRef
	changes  []route.PolicyChange
	steps    []route.ReviewStep
	refusal  route.Refusal
	create   route.AdmitResult
	update   route.UpdateResult
	budget   quota.BudgetResult
	review   route.ReviewResult
	nameTake *route.NameTakenError
}

func samples() sample {
	consumer := quota.ConsumerID{APIGroup: "resourcemanager.miloapis.com", Kind: "Project", Namespace: "", Name: "p1"}
	dims := quota.Dimensions{{Key: "zone", Value: "a"}}
	id := quota.BucketID{Consumer: consumer, ResourceType: "compute.example.com/cpus", Dims: "zone=a"}
	bucket := quota.BucketStatus{ID: id, Dims: dims, Limit: 10, Allocated: 9, Claims: 2,
		Grants:    []quota.GrantContribution{{Namespace: "organization-acme", Name: "g", Amount: 10, Generation: 3, ExpiresAt: time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)}},
		Unlimited: true, Clusters: map[string]int64{"east": 4}}
	after := bucket
	after.Allocated = 10
	decision := quota.Decision{Outcome: quota.QuotaExceeded, Message: "not enough cpus", Requests: []quota.RequestResult{{
		ResourceType: "compute.example.com/cpus", Status: "Denied", Reason: "QuotaExceeded", Message: "2 asked, 1 left", Allocated: 3, Bucket: id,
		Refused: &bucket, Levels: []quota.LevelStatus{{Consumer: consumer, Limited: true, Bucket: bucket, Refused: true}}}}}
	claim := &quotav1alpha1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u1", Annotations: map[string]string{quotav1alpha1.AnnotationResourceUID: "obj-1"}},
		Spec: quotav1alpha1.ResourceClaimSpec{ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: consumer.APIGroup, Kind: consumer.Kind, Name: consumer.Name},
			Requests: []quotav1alpha1.ResourceRequest{{ResourceType: "compute.example.com/cpus", Amount: 2}}}}
	grant := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: "ns"},
		Spec: quotav1alpha1.ResourceGrantSpec{ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: consumer.APIGroup, Kind: consumer.Kind, Name: consumer.Name},
			Allowances: []quotav1alpha1.Allowance{{ResourceType: "compute.example.com/cpus", Buckets: []quotav1alpha1.GrantBucket{{Amount: 4}}}}}}
	object := route.ObjectRef{APIGroup: "apps", Kind: "Deployment", Resource: "deployments.v1.apps", Namespace: "ns", Name: "web", UID: "obj-1", Plane: "projects/p1"}
	changes := []route.PolicyChange{{Policy: "replicas", Claim: claim, Check: route.UpdateCheck{Generation: 4,
		Trigger: quotav1alpha1.Trigger{Resource: quotav1alpha1.TriggerResource{APIVersion: "apps/v1", Kind: "Deployment"}},
		User:    map[string]any{"username": "alice"}, RequestInfo: map[string]any{"verb": "update"}}}}
	cell := quota.Cell{Consumer: consumer, ResourceType: "compute.example.com/cpus", Dims: "zone=a"}
	taken := &route.NameTakenError{Claim: "ns/c", Policy: "replicas", By: "a stored ResourceClaim"}
	return sample{
		claim: claim, grant: grant, object: object, changes: changes,
		steps: []route.ReviewStep{{Claims: []*quotav1alpha1.ResourceClaim{claim}}, {Update: &object, Changes: changes}},
		refusal: route.Refusal{Consumer: consumer, Object: history.ObjectRef{APIGroup: "apps", Kind: "Deployment", Namespace: "ns", Name: "web", UID: "obj-1"},
			Policy: "replicas", Requests: []history.Amount{{ResourceType: "compute.example.com/cpus", Amount: 2}}, Message: "insufficient quota"},
		create: route.AdmitResult{Granted: true, Decisions: []quota.Decision{decision}, Claims: []quota.Claim{{UID: "u1", Namespace: "ns", Name: "c",
			Created: time.Date(2026, 12, 7, 5, 6, 7, 0, time.UTC), Consumer: consumer,
			Requests:    []quota.Request{{ResourceType: "compute.example.com/cpus", Amount: 2, Dims: dims}},
			ResourceRef: &quota.GroupKind{Group: "apps", Kind: "Deployment"}, Cluster: "east"}}},
		update: route.UpdateResult{Granted: true, Changes: []route.ChangeResult{{Policy: "replicas",
			Old: map[quota.Cell]int64{cell: 2}, New: map[quota.Cell]int64{cell: 5}, Decision: &decision}}},
		budget: quota.BudgetResult{OK: true, ResourceType: "compute.example.com/cpus", Asked: 5, Left: 2, Limit: 10, Given: 8, Message: "within the budget"},
		review: route.ReviewResult{Steps: []route.ReviewStepResult{{Granted: true, Decisions: []quota.Decision{decision}, Policies: []string{"replicas"},
			Charges: []route.ReviewCharge{{Policy: "replicas", Cell: cell, New: 5, Held: 2}}, NameTaken: taken}},
			Buckets: []accounting.WhatIfBucket{{Before: bucket, After: after}}},
		nameTake: taken,
	}
}
