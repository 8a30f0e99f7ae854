package wire

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Header names the version a message is written in; VersionsHeader, on a
// refusal, the versions the receiver speaks.
const (
	Header         = "Quotaplane-Peer-Version"
	VersionsHeader = "Quotaplane-Peer-Versions"
)

// Version is the version this replica writes; Previous the one before it,
// which it still reads and writes.
const (
	Version  = 2
	Previous = 1
)

// Speaks reports whether this replica reads and writes version v.
func Speaks(v int) bool { return v == Version || v == Previous }

// Spoken is the versions this replica speaks, for VersionsHeader: "2,1".
func Spoken() string { return fmt.Sprintf("%d,%d", Version, Previous) }

// Of is the version of a request: its header's, 1 without one; an error for
// a header that is not a number.
func Of(r *http.Request) (int, error) {
	h := r.Header.Get(Header)
	if h == "" {
		return 1, nil
	}
	v, err := strconv.Atoi(h)
	if err != nil || v < 1 {
		return 0, fmt.Errorf("the header %s is %q, not a version number", Header, h)
	}
	return v, nil
}

// Set writes version v's header on a request or an answer (version 1 has
// none).
func Set(h http.Header, v int) {
	if v > 1 {
		h.Set(Header, strconv.Itoa(v))
	}
}

// Unsupported is the refusal of a message in version v by a replica that
// speaks Version and Previous.
func Unsupported(v int) *Error {
	return &Error{Kind: ErrorUnsupportedVersion, Message: fmt.Sprintf(
		"this replica speaks peer message versions %d and %d, not version %d: its sender and this replica are more than one version apart; "+
			"upgrade the replicas one version at a time (docs/replicas.md)", Version, Previous, v)}
}

// Shared is the highest version this replica speaks among the receiver's
// spoken versions (VersionsHeader), and whether there is one.
func Shared(spoken string) (int, bool) {
	best := 0
	for _, f := range strings.Split(spoken, ",") {
		if v, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && Speaks(v) && v > best {
			best = v
		}
	}
	return best, best > 0
}
