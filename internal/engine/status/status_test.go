package status

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/fence"
	"github.com/quotaplane/quotaplane/internal/policy"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/quota/accounting"
)

var org = quota.ConsumerID{APIGroup: quota.OrganizationGroup, Kind: "Organization", Name: "acme"}

func testSealer() *fence.Sealer { return fence.NewSealer([]byte("0123456789abcdef0123456789abcdef")) }

func storedClaim(uid string, conds ...metav1.Condition) *quotav1alpha1.ResourceClaim {
	return &quotav1alpha1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "u-" + "c", Generation: 1},
		Spec: quotav1alpha1.ResourceClaimSpec{ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: org.APIGroup, Kind: org.Kind, Name: org.Name},
			Requests: []quotav1alpha1.ResourceRequest{{ResourceType: "x.io/a", Amount: 1}}},
		Status: quotav1alpha1.ResourceClaimStatus{Conditions: conds},
	}
}

// TestClaimWriter: the claim writer writes a decision only to the claim it
// was made for, only when the status says something else, and asks for
// another round of decisions when a grant frees room in the ledger.
func TestClaimWriter(t *testing.T) {
	granted := quota.Decision{Outcome: quota.Granted}
	denied := quota.Decision{Outcome: quota.QuotaExceeded, Message: "no room"}
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "resourceclaims"}, "c")
	cases := map[string]struct {
		decision  quota.Decision
		known     bool
		stored    *quotav1alpha1.ResourceClaim
		updateErr error
		blocked   bool

		wantWrites  int
		wantReason  string
		wantKicks   int
		wantErr     bool
		wantWritten bool
	}{
		"unknown claim: deleted, nothing to write": {known: false, stored: storedClaim("c")},
		"not in the cache yet: retried":            {known: true, decision: granted, wantErr: true},
		"another claim of that name: left alone": {known: true, decision: granted,
			stored: func() *quotav1alpha1.ResourceClaim { c := storedClaim("c"); c.UID = "other"; return c }()},
		"granted: written and sealed": {known: true, decision: granted, stored: storedClaim("c"),
			wantWrites: 1, wantReason: quotav1alpha1.ClaimReasonQuotaAvailable, wantWritten: true},
		"granted with decisions held back: kicks": {known: true, decision: granted, stored: storedClaim("c"), blocked: true,
			wantWrites: 1, wantReason: quotav1alpha1.ClaimReasonQuotaAvailable, wantWritten: true, wantKicks: 1},
		"denied: written, the ledger is not told": {known: true, decision: denied, stored: storedClaim("c"),
			wantWrites: 1, wantReason: quotav1alpha1.ClaimReasonQuotaExceeded},
		"deleted while writing: nothing more to do": {known: true, decision: denied, stored: storedClaim("c"), updateErr: notFound,
			wantWrites: 1},
		"a failed write is retried": {known: true, decision: denied, stored: storedClaim("c"), updateErr: errors.New("etcd is slow"),
			wantWrites: 1, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			qc := quota.Claim{UID: "u-c", Namespace: "ns", Name: "c", Consumer: org, Requests: []quota.Request{{ResourceType: "x.io/a", Amount: 1}}}
			var writes []*quotav1alpha1.ResourceClaim
			kicks, written := 0, false
			w := &ClaimWriter{
				Decision: func(uid string) (quota.Decision, quota.Claim, string, bool) { return tc.decision, qc, "ns/c", tc.known },
				Stored: func(string) (*quotav1alpha1.ResourceClaim, bool, error) {
					return tc.stored, tc.stored != nil, nil
				},
				UpdateStatus: func(_ context.Context, c *quotav1alpha1.ResourceClaim) error {
					writes = append(writes, c)
					return tc.updateErr
				},
				Written: func(string) bool { written = true; return tc.blocked },
				Kick:    func() { kicks++ },
				Sealer:  testSealer(),
			}
			err := w.Reconcile(context.Background(), "u-c")
			if (err != nil) != tc.wantErr {
				t.Fatalf("Reconcile: %v, want error %t", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantWrites, len(writes)); diff != "" {
				t.Errorf("status writes (-want +got):\n%s", diff)
			}
			if tc.wantReason != "" && len(writes) > 0 {
				c := meta.FindStatusCondition(writes[0].Status.Conditions, quotav1alpha1.ClaimConditionGranted)
				if c == nil || c.Reason != tc.wantReason {
					t.Errorf("written condition %+v; want reason %s", c, tc.wantReason)
				}
				if sealed := writes[0].Status.DecisionSeal != ""; sealed != (tc.decision.Outcome == quota.Granted) {
					t.Errorf("sealed %t for outcome %s", sealed, tc.decision.Outcome)
				}
			}
			if written != tc.wantWritten || kicks != tc.wantKicks {
				t.Errorf("ledger told %t, kicks %d; want %t, %d", written, kicks, tc.wantWritten, tc.wantKicks)
			}
		})
	}
}

// TestClaimWriterSkipsAnEqualStatus: a status that already says the decision
// is not written again (no write per resync).
func TestClaimWriterSkipsAnEqualStatus(t *testing.T) {
	qc := quota.Claim{UID: "u-c", Namespace: "ns", Name: "c", Consumer: org}
	d := quota.Decision{Outcome: quota.QuotaExceeded, Message: "no room"}
	stored := storedClaim("c")
	stored.Status = ClaimStatus(stored, qc, d, testSealer())
	writes := 0
	w := &ClaimWriter{
		Decision:     func(string) (quota.Decision, quota.Claim, string, bool) { return d, qc, "ns/c", true },
		Stored:       func(string) (*quotav1alpha1.ResourceClaim, bool, error) { return stored, true, nil },
		UpdateStatus: func(context.Context, *quotav1alpha1.ResourceClaim) error { writes++; return nil },
		Sealer:       testSealer(),
	}
	if err := w.Reconcile(context.Background(), "u-c"); err != nil {
		t.Fatal(err)
	}
	if writes != 0 {
		t.Errorf("an equal status was written %d times", writes)
	}
}

// TestConditionWriter: grants and registrations get Active from the
// accounts' validity; a policy's Ready says why it is not enforced.
func TestConditionWriter(t *testing.T) {
	reg := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: "a", Generation: 2},
		Spec: quotav1alpha1.ResourceRegistrationSpec{ResourceType: "x.io/a", BaseUnit: "unit", Type: quotav1alpha1.RegistrationTypeEntity,
			ConsumerType: quotav1alpha1.ConsumerTypeRef{APIGroup: org.APIGroup, Kind: org.Kind}}}
	grant := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "g1", Generation: 3},
		Spec: quotav1alpha1.ResourceGrantSpec{ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: org.APIGroup, Kind: org.Kind, Name: org.Name},
			Allowances: []quotav1alpha1.Allowance{{ResourceType: "x.io/a", Buckets: []quotav1alpha1.GrantBucket{{Amount: 5}}}}}}
	unknownGrant := grant.DeepCopy()
	unknownGrant.UID, unknownGrant.Name = "g2", "g2"
	unknownGrant.Spec.Allowances[0].ResourceType = "x.io/unregistered"
	disabled := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1},
		Spec: quotav1alpha1.ClaimCreationPolicySpec{Disabled: true}}
	cases := map[string]struct {
		key        Key
		wantStatus metav1.ConditionStatus
		wantReason string
	}{
		"a valid grant is Active":                 {key: Key{Kind: KindGrant, Name: "g1"}, wantStatus: metav1.ConditionTrue},
		"a grant of no registration is not":       {key: Key{Kind: KindGrant, Name: "g2"}, wantStatus: metav1.ConditionFalse},
		"the registration in force is Active":     {key: Key{Kind: KindRegistration, Name: "a"}, wantStatus: metav1.ConditionTrue},
		"a disabled policy is not Ready, says so": {key: Key{Kind: KindPolicy, Name: "p"}, wantStatus: metav1.ConditionFalse, wantReason: policy.ReasonDisabled},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			acc := accounting.New()
			acc.UpsertRegistration(quota.Registration{Name: "a", ResourceType: "x.io/a", BaseUnit: "unit", ConsumerType: quota.GroupKind{Group: org.APIGroup, Kind: org.Kind}})
			for _, g := range []*quotav1alpha1.ResourceGrant{grant, unknownGrant} {
				acc.UpsertGrant(quota.Grant{UID: string(g.UID), Namespace: g.Namespace, Name: g.Name, Consumer: org,
					Allowances: []quota.Allowance{{ResourceType: string(g.Spec.Allowances[0].ResourceType), Buckets: []quota.GrantBucket{{Amount: 5}}}}})
			}
			var written []client.Object
			w := &ConditionWriter{
				GrantKey: func(uid string) string { return map[string]string{"g1": "ns/g", "g2": "ns/g2"}[uid] },
				Grant: func(k string) (*quotav1alpha1.ResourceGrant, bool, error) {
					g := map[string]*quotav1alpha1.ResourceGrant{"ns/g": grant, "ns/g2": unknownGrant}[k]
					return g, g != nil, nil
				},
				Registration: func(string) (*quotav1alpha1.ResourceRegistration, bool, error) { return reg, true, nil },
				Policy:       func(string) (*quotav1alpha1.ClaimCreationPolicy, bool, error) { return disabled, true, nil },
				Read:         func(fn func(*accounting.Accounts)) { fn(acc) },
				Schemas: func(context.Context, quotav1alpha1.TriggerResource) (policy.Options, SchemaState) {
					return policy.Options{}, SchemaKnown
				},
				UpdateStatus: func(_ context.Context, o client.Object) error { written = append(written, o); return nil },
			}
			if _, err := w.Reconcile(context.Background(), tc.key); err != nil {
				t.Fatal(err)
			}
			if len(written) != 1 {
				t.Fatalf("%d status writes; want 1", len(written))
			}
			var conds []metav1.Condition
			var observed, generation int64
			switch o := written[0].(type) {
			case *quotav1alpha1.ResourceGrant:
				conds, observed, generation = o.Status.Conditions, o.Status.ObservedGeneration, o.Generation
			case *quotav1alpha1.ResourceRegistration:
				conds, observed, generation = o.Status.Conditions, o.Status.ObservedGeneration, o.Generation
			case *quotav1alpha1.ClaimCreationPolicy:
				conds, observed, generation = o.Status.Conditions, o.Status.ObservedGeneration, o.Generation
			}
			if observed != generation {
				t.Errorf("observedGeneration %d, generation %d", observed, generation)
			}
			if len(conds) != 1 || conds[0].Status != tc.wantStatus || (tc.wantReason != "" && conds[0].Reason != tc.wantReason) {
				t.Errorf("conditions %+v; want status %s reason %q", conds, tc.wantStatus, tc.wantReason)
			}
			// Written again with nothing changed: no write.
			switch o := written[0].(type) {
			case *quotav1alpha1.ResourceGrant:
				if o.Name == "g" {
					*grant = *o
				} else {
					*unknownGrant = *o
				}
			case *quotav1alpha1.ResourceRegistration:
				*reg = *o
			case *quotav1alpha1.ClaimCreationPolicy:
				*disabled = *o
			}
			if _, err := w.Reconcile(context.Background(), tc.key); err != nil {
				t.Fatal(err)
			}
			if len(written) != 1 {
				t.Errorf("an unchanged condition was written again")
			}
		})
	}
}

// TestAGrantsConsumerIsStatusNotACondition: whether a grant's consumer
// exists is status.consumerState; the conditions stay the reference
// implementation's [Active "ResourceGrant is active"], a ConsumerFound
// condition an earlier version wrote is removed, and a missing consumer is
// told once, in a Warning Event naming the nearest existing name.
func TestAGrantsConsumerIsStatusNotACondition(t *testing.T) {
	active := []metav1.Condition{{Type: quotav1alpha1.GrantConditionActive, Status: metav1.ConditionTrue, Reason: quotav1alpha1.GrantReasonActive,
		Message: quota.GrantActiveMessage, ObservedGeneration: 1}}
	stale := metav1.Condition{Type: quotav1alpha1.GrantConditionConsumerFound, Status: metav1.ConditionTrue, Reason: quotav1alpha1.GrantReasonConsumerFound}
	for name, tc := range map[string]struct {
		consumer   string
		selector   bool
		stored     []metav1.Condition
		wantState  quotav1alpha1.GrantConsumerState
		wantEvents []string
	}{
		"found":                             {consumer: "acme-corp", wantState: quotav1alpha1.GrantConsumerFound},
		"found, with a stale ConsumerFound": {consumer: "acme-corp", stored: []metav1.Condition{active[0], stale}, wantState: quotav1alpha1.GrantConsumerFound},
		"missing": {consumer: "acem-corp", wantState: quotav1alpha1.GrantConsumerMissing, wantEvents: []string{
			"Warning ConsumerNotFound there is no Organization acem-corp, so this grant limits nothing until one is created; did you mean acme-corp?; correct spec.consumerRef.name, or create the Organization"}},
		"a group's grant": {selector: true},
	} {
		t.Run(name, func(t *testing.T) {
			g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "g1", Generation: 1},
				Spec: quotav1alpha1.ResourceGrantSpec{ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: org.APIGroup, Kind: org.Kind, Name: tc.consumer},
					Allowances: []quotav1alpha1.Allowance{{ResourceType: "x.io/a", Buckets: []quotav1alpha1.GrantBucket{{Amount: 5}}}}},
				Status: quotav1alpha1.ResourceGrantStatus{Conditions: tc.stored}}
			if tc.selector {
				g.Spec.ConsumerSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"quota.miloapis.com/tier": "gold"}}
			}
			acc := accounting.New()
			acc.UpsertRegistration(quota.Registration{Name: "a", ResourceType: "x.io/a", BaseUnit: "unit", ConsumerType: quota.GroupKind{Group: org.APIGroup, Kind: org.Kind}})
			acc.UpsertGrant(quota.Grant{UID: "g1", Namespace: "ns", Name: "g", Consumer: quota.ConsumerID{APIGroup: org.APIGroup, Kind: org.Kind, Name: tc.consumer},
				Allowances: []quota.Allowance{{ResourceType: "x.io/a", Buckets: []quota.GrantBucket{{Amount: 5}}}}})
			var events []string
			writes := 0
			w := &ConditionWriter{
				GrantKey: func(string) string { return "ns/g" },
				Grant:    func(string) (*quotav1alpha1.ResourceGrant, bool, error) { return g, true, nil },
				Read:     func(fn func(*accounting.Accounts)) { fn(acc) },
				Consumer: func(id quota.ConsumerID) (bool, bool, []string) {
					return id.Name == "acme-corp", true, []string{"acme-corp", "globex"}
				},
				Event: func(_ runtime.Object, eventType, reason, message string) {
					events = append(events, eventType+" "+reason+" "+message)
				},
				UpdateStatus: func(_ context.Context, o client.Object) error {
					writes++
					*g = *o.(*quotav1alpha1.ResourceGrant)
					return nil
				},
			}
			for range 2 { // the second finds nothing to write or tell
				if _, err := w.Reconcile(context.Background(), Key{Kind: KindGrant, Name: "g1"}); err != nil {
					t.Fatal(err)
				}
			}
			if writes != 1 {
				t.Errorf("%d status writes; want 1", writes)
			}
			if diff := cmp.Diff(active, g.Status.Conditions, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if g.Status.ConsumerState != tc.wantState {
				t.Errorf("status.consumerState %q; want %q", g.Status.ConsumerState, tc.wantState)
			}
			if diff := cmp.Diff(tc.wantEvents, events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}
