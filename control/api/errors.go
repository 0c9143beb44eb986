package api

import (
	"net/http"

	"github.com/parley-voice/parley/control/fault"
)

// commonCodes are the codes any authenticated operation can answer.
var commonCodes = []string{
	fault.CodeMissingKey, fault.CodeMalformedKey, fault.CodeUnknownKey, fault.CodeRevokedKey, fault.CodeExpiredKey, fault.CodeLiveBrowser,
	fault.CodeRateLimited, fault.CodeInternal, fault.CodeServiceUnavailable, fault.CodeHeadersTooLarge,
}

// statusText is the title of a status.
func statusText(s int) string { return http.StatusText(s) }
