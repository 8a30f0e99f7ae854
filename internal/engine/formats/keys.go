package formats

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
)

// AdmissionGrantsPrefix holds the grants made at admission whose claims are
// not written yet, one key per claim: <prefix>/quotaplane/admission-grants/<namespace>/<claim>.
// etcdPrefix is the API server's --etcd-prefix.
func AdmissionGrantsPrefix(etcdPrefix string) string {
	return path.Join(etcdPrefix, "quotaplane", "admission-grants") + "/"
}

// BudgetHoldsPrefix holds the delegated grants admitted against an
// organization's budget and not yet seen stored, one key per grant:
// <prefix>/quotaplane/budget-holds/<namespace>/<grant>.
func BudgetHoldsPrefix(etcdPrefix string) string {
	return path.Join(etcdPrefix, "quotaplane", "budget-holds") + "/"
}

// FailOpenPrefix holds one FailOpenRecord per object admitted fail-open.
func FailOpenPrefix(etcdPrefix string) string {
	return path.Join(etcdPrefix, "quotaplane", "fail-open") + "/"
}

// FailOpenKey is the key of the FailOpenRecord of the object with that UID.
func FailOpenKey(etcdPrefix, uid string) string {
	return FailOpenPrefix(etcdPrefix) + uid
}

// FailOpenRecord says that an object was admitted without the claims its
// ClaimCreationPolicies would make, because they are fail-open
// (failurePolicy: Ignore) and could not be evaluated or decided. It is stored
// as JSON under FailOpenKey.
type FailOpenRecord struct {
	// Resource is the object's resource.version.group.
	Resource string `json:"resource"`
	// Namespace is empty for a cluster-scoped object.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	// Policies are the ClaimCreationPolicies that charged nothing.
	Policies []string `json:"policies"`
	// Reason says why, as the request's audit annotation does.
	Reason string `json:"reason"`
	// Time is when the object was admitted, in RFC 3339.
	Time string `json:"time"`
}

// EtcdFile is the file in serve's data directory naming the etcd that holds
// these keys, so that `quotaplane verify --data-dir` finds an embedded etcd,
// whose port is chosen at each start.
const EtcdFile = "etcd.json"

// EtcdLocation is what EtcdFile holds.
type EtcdLocation struct {
	Servers []string `json:"servers"`
	// Prefix is serve's --etcd-prefix.
	Prefix string `json:"prefix"`
	// CAFile, CertFile and KeyFile secure the connection, when etcd needs it.
	CAFile   string `json:"cafile,omitempty"`
	CertFile string `json:"certfile,omitempty"`
	KeyFile  string `json:"keyfile,omitempty"`
}

// WriteEtcdFile records where serve's etcd is, in its data directory.
func WriteEtcdFile(dataDir string, loc EtcdLocation) error {
	data, err := json.MarshalIndent(loc, "", "  ")
	if err != nil {
		return err
	}
	p := filepath.Join(dataDir, EtcdFile)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("recording the etcd endpoints in %s: %w", p, err)
	}
	return os.Rename(tmp, p)
}

// ReadEtcdFile reads where serve's etcd is from its data directory.
func ReadEtcdFile(dataDir string) (EtcdLocation, error) {
	p := filepath.Join(dataDir, EtcdFile)
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return EtcdLocation{}, fmt.Errorf("%s does not exist: the server on this data directory did not record its etcd; pass --etcd-servers and --etcd-prefix instead", p)
	}
	if err != nil {
		return EtcdLocation{}, err
	}
	var loc EtcdLocation
	if err := json.Unmarshal(data, &loc); err != nil {
		return EtcdLocation{}, fmt.Errorf("%s is not valid: %w", p, err)
	}
	if len(loc.Servers) == 0 {
		return EtcdLocation{}, fmt.Errorf("%s names no etcd server", p)
	}
	return loc, nil
}
