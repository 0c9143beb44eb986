package api

import "reflect"

// Problem is the schema of every error answer: an RFC 9457 problem document, as package problem
// writes it. It is here only to be reflected into the document.
type Problem struct {
	Type       string       `json:"type" doc:"https://parley.dev/problems/<code>" jsonschema:"format=uri"`
	Title      string       `json:"title" doc:"The HTTP status text."`
	Status     int          `json:"status" jsonschema:"minimum=400,maximum=599"`
	Code       string       `json:"code" doc:"The stable error code; one of x-error-codes. New codes may be added: treat an unknown code by its status."`
	Detail     string       `json:"detail"`
	RequestID  string       `json:"request_id"`
	Errors     []FieldError `json:"errors,omitempty" doc:"For validation problems: each place that does not fit."`
	Permission string       `json:"permission,omitempty" doc:"For missing_permission: the permission the operation needs."`
}

// SchemaDoc describes the object in the document.
func (Problem) SchemaDoc() string {
	return "An RFC 9457 problem document (Content-Type application/problem+json). code is stable and listed in x-error-codes; detail is for people; request_id identifies the request in the service's logs (quote it to support on a 500)."
}

// SchemaExtras: a problem may carry members of its own (opens_at, say), as RFC 9457 §3.2 allows.
func (Problem) SchemaExtras() map[string]any { return map[string]any{"additionalProperties": true} }

// FieldError is one place of a request that does not fit.
type FieldError struct {
	Pointer   string `json:"pointer,omitempty" doc:"An RFC 6901 JSON pointer into the JSON body; \"\" is the whole body."`
	Parameter string `json:"parameter,omitempty" doc:"A query parameter or header name."`
	Code      string `json:"code" doc:"unknown_field, required, invalid_type, too_short, too_long, out_of_range, invalid_value, invalid_format, not_unique, duplicate_member, malformed_json, invalid_placeholder, unknown_reference, not_allowed, not_allowed_for_kind, phone_number_not_allowed, domain_not_allowed, credential_not_allowed, object_id_not_allowed, kind_mismatch, direction_mismatch, invalid_parameter, unknown_parameter, invalid_cursor, cursor_mismatch; may gain values."`
	Detail    string `json:"detail"`
}

// SchemaDoc describes the object in the document.
func (FieldError) SchemaDoc() string {
	return "One place that does not fit: pointer (into the JSON body) or parameter (a query parameter or header)."
}

var problemType = reflect.TypeFor[Problem]()
