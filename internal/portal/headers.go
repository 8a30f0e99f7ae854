package portal

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io/fs"
	"net/http"
	"regexp"
	"strings"
)

// inlineScript is a <script> element of the pages; those without src are
// inline and allowed by their hash.
var inlineScript = regexp.MustCompile(`(?s)<script([^>]*)>(.*?)</script>`)

// contentSecurityPolicy is the portal's policy: everything from the portal
// itself (its pages, vendored modules and API are served from one origin),
// the pages' inline scripts (the import map) by their hash, no inline
// script or style otherwise, no eval, no plugins, never framed.
func contentSecurityPolicy(pages fs.FS) (string, error) {
	index, err := fs.ReadFile(pages, "index.html")
	if err != nil {
		return "", fmt.Errorf("reading the portal's index.html: %w", err)
	}
	scripts := []string{"'self'"}
	for _, m := range inlineScript.FindAllSubmatch(index, -1) {
		if strings.Contains(string(m[1]), "src=") {
			continue
		}
		sum := sha256.Sum256(m[2])
		scripts = append(scripts, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
	}
	return strings.Join([]string{
		"default-src 'none'",
		"script-src " + strings.Join(scripts, " "),
		"style-src 'self'",
		"img-src 'self' data:",
		"connect-src 'self'",
		"base-uri 'none'",
		"form-action 'self'",
		"object-src 'none'",
		"frame-ancestors 'none'",
	}, "; "), nil
}

// secure sets the headers every answer of the portal carries, pages and API
// alike: its Content-Security-Policy, no framing (X-Frame-Options for
// browsers without frame-ancestors), no Referer sent from its pages, and no
// content sniffing.
func secure(h http.Header, csp string) {
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
}
