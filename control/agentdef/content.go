package agentdef

import (
	"regexp"
	"strings"
)

// Problem codes of content a definition must not carry (spec: "No credential, no id of another
// object, no phone number and no domain is carried in a definition").
const (
	CodePhoneNumber = "phone_number_not_allowed"
	CodeDomain      = "domain_not_allowed"
	CodeCredential  = "credential_not_allowed"
	CodeObjectID    = "object_id_not_allowed"
)

// finding is one piece of forbidden content in a string.
type finding struct {
	code, what string
}

// The detectors below are deliberately conservative heuristics: they catch the shapes that
// matter (numbers people can be called on, addresses that name a host, secrets, object ids)
// and leave ordinary prose alone. Each is documented in docs/agent-definition.md.
var (
	// Phone numbers: an international number (plus sign, 7–15 digits, with the usual
	// separators), a North American grouping (415) 555-0100 / 415-555-0100, a run of 10–15
	// digits, or a tel: URI.
	phonePlus  = regexp.MustCompile(`\+[\s(]*\d(?:[\s().-]*\d){6,14}`)
	phoneNANP  = regexp.MustCompile(`(?:^|[^\w-])\(?\d{3}\)?[\s.-]\d{3}[\s.-]\d{4}\b`)
	phoneDigit = regexp.MustCompile(`(?:^|\D)\d{10,15}(?:\D|$)`)
	phoneTel   = regexp.MustCompile(`(?i)\btel:`)

	// Domains: a URL of any scheme, www., an e-mail address, an IPv4 address, or a lowercase
	// host name ending in a common top-level domain.
	domainURL   = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]{1,20}://`)
	domainWWW   = regexp.MustCompile(`(?i)\bwww\.`)
	domainEmail = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`)
	domainIPv4  = regexp.MustCompile(`\b(?:\d{1,3}\.){3}\d{1,3}\b`)
	domainHost  = regexp.MustCompile(`\b(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+(?:` + tlds + `)\b`)

	// Credentials: the key shapes of common services, a private key block, a JWT, a bearer
	// token, a secret written as name=value or name: value, and long random-looking tokens.
	credentialPatterns = []*regexp.Regexp{
		regexp.MustCompile(`\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{8,}`),
		regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{16,}`),
		regexp.MustCompile(`\bwhsec_[A-Za-z0-9+/=]{8,}`),
		regexp.MustCompile(`\bAKIA[0-9A-Z]{16}\b`),
		regexp.MustCompile(`\bxox[abprs]-[A-Za-z0-9-]{10,}`),
		regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{20,}`),
		regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{30,}`),
		regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.`),
		regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----`),
		regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9._~+/-]{16,}`),
		regexp.MustCompile(`(?i)\b(?:password|passwd|api[_ -]?key|secret|access[_ -]?token|auth[_ -]?token)\s*[:=]\s*\S{4,}`),
	}
	longToken = regexp.MustCompile(`[A-Za-z0-9_\-+/=]{32,}`)

	// Object ids: a UUID.
	uuidPattern = regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
)

// tlds are the top-level domains a bare host name is recognised by. Only lowercase names count,
// so that "U.S." or "Thanks.It" in prose is not taken for a host.
const tlds = `com|net|org|io|ai|co|dev|app|info|biz|me|us|uk|de|fr|es|it|nl|be|ch|at|se|no|dk|fi|pl|cz|pt|ie|ca|au|nz|jp|cn|in|br|mx|ru|eu|tv|xyz|online|site|tech|cloud|store|shop|gov|edu|mil|int|ly|gg|sh|so|to`

// scan reports the forbidden content in s. allowUUID exempts object ids (a text-to-speech
// vendor's voice identifier may be UUID-shaped and names no object of this service).
func scan(s string, allowUUID bool) []finding {
	var out []finding
	if !allowUUID && uuidPattern.MatchString(s) {
		out = append(out, finding{CodeObjectID, "an id (UUID)"})
	}
	// UUIDs are taken out before the other detectors so that their digits are not read as
	// phone numbers or tokens.
	rest := uuidPattern.ReplaceAllString(s, " ")
	switch {
	case phonePlus.MatchString(rest), phoneNANP.MatchString(rest), phoneDigit.MatchString(rest), phoneTel.MatchString(rest):
		out = append(out, finding{CodePhoneNumber, "a phone number"})
	}
	switch {
	case domainURL.MatchString(rest), domainWWW.MatchString(rest), domainEmail.MatchString(rest),
		domainIPv4.MatchString(rest), domainHost.MatchString(rest):
		out = append(out, finding{CodeDomain, "a domain, address or URL"})
	}
	if isCredential(rest) {
		out = append(out, finding{CodeCredential, "what looks like a credential"})
	}
	return out
}

func isCredential(s string) bool {
	for _, p := range credentialPatterns {
		if p.MatchString(s) {
			return true
		}
	}
	for _, tok := range longToken.FindAllString(s, -1) {
		if randomLooking(tok) {
			return true
		}
	}
	return false
}

// randomLooking reports whether a long token mixes upper case, lower case and digits, as keys
// and secrets do and words, paths and model names rarely do.
func randomLooking(tok string) bool {
	var upper, lower, digit bool
	for _, r := range tok {
		switch {
		case r >= 'A' && r <= 'Z':
			upper = true
		case r >= 'a' && r <= 'z':
			lower = true
		case r >= '0' && r <= '9':
			digit = true
		}
	}
	return upper && lower && digit && !strings.ContainsAny(tok, " ")
}
