package app

import (
	"fmt"
	"strings"

	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/jsoncheck"
)

// Invalid is the 422 validation_failed of the places in a request that do not fit, in the
// transport's form: errors[] names each, and detail repeats the first three.
func Invalid(ps ...jsoncheck.Problem) *fault.Error {
	fes := make([]fault.FieldError, len(ps))
	details := make([]string, 0, 3)
	for i, p := range ps {
		fes[i] = fault.FieldError{Pointer: p.Pointer, Code: p.Code, Detail: p.Detail}
		if i < 3 {
			details = append(details, p.Detail)
		}
	}
	detail := strings.Join(details, " ")
	if len(ps) > 3 {
		detail += fmt.Sprintf(" (%d more in errors)", len(ps)-3)
	}
	e := fault.E(fault.CodeValidationFailed, "%s", detail)
	e.Errors = fes
	return e
}
