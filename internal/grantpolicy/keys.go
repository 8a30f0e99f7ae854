package grantpolicy

// key names one trigger object of one policy, the unit of reconciliation.
// A key with an empty name is the policy itself.
type key struct {
	policy    string
	namespace string
	name      string
}

func policyKey(name string) key { return key{policy: name} }

func (k key) isPolicy() bool { return k.name == "" }
