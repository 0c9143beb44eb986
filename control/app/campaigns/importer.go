package campaigns

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/jsoncheck"
	"github.com/parley-voice/parley/control/store"
)

// MaxImportRows is how many rows one import takes; the rows past it are refused, each named.
const MaxImportRows = 10000

// Import formats.
const (
	FormatCSV   = "csv"
	FormatJSONL = "jsonl"
)

// ImportError names a row that was refused and the field that did not fit.
type ImportError struct {
	Row    int    `json:"row" doc:"The row's number: 1 is the first row of data (after a CSV header), or the first line of JSON lines." jsonschema:"minimum=1"`
	Field  string `json:"field" doc:"The column or member that does not fit; empty for the whole row."`
	Code   string `json:"code" doc:"What is wrong with the field: the code a createContact problem's errors[] would give it (invalid_format, invalid_value, …), or duplicate, malformed, too_many_rows, number_on_do_not_call_list."`
	Detail string `json:"detail"`
	Type   string `json:"type" doc:"The problem type the row alone would get from createContact: https://parley.dev/problems/validation_failed (422) for a field that does not fit (a bad number, an unknown time zone, …) or a row that repeats an earlier one, https://parley.dev/problems/number_on_do_not_call_list (409) for a number on the list." jsonschema:"format=uri"`
}

// ImportResult is the answer of an import.
type ImportResult struct {
	Object  string        `json:"object" jsonschema:"enum=contact_import"`
	Rows    int           `json:"rows" doc:"The rows read (the header not counted)." jsonschema:"minimum=0"`
	Created int           `json:"created" jsonschema:"minimum=0"`
	Updated int           `json:"updated" doc:"Rows that matched a contact by external_id, or else by number, and replaced its values." jsonschema:"minimum=0"`
	Refused int           `json:"refused" jsonschema:"minimum=0"`
	Errors  []ImportError `json:"errors" doc:"One entry per problem of a refused row (a row can have several)."`
}

// SchemaDoc describes the object in the document.
func (ImportResult) SchemaDoc() string {
	return "What an import did: the rows created, updated (matched by external_id, or else by number) and refused; errors names each refused row and field. A bad row never stops the others; importing the same file again updates and creates nothing new."
}

// ImportUpload documents the body of an import.
type ImportUpload struct {
	File string `json:"file" doc:"The CSV file (a header row naming the columns number, name, timezone, external_id, and var.<name> / meta.<name> for variables and metadata) or JSON lines (one ContactCreate object per line)." jsonschema:"format=binary"`
}

// SchemaDoc describes the body in the document.
func (ImportUpload) SchemaDoc() string {
	return "multipart/form-data with a part named file, or the file itself as the body: text/csv, or application/x-ndjson (JSON lines). At most 10,000 rows."
}

// importRow is one row read, with its problems.
type importRow struct {
	n        int
	contact  store.Contact
	problems []ImportError
}

// Import reads CSV or JSON lines and upserts the rows that fit into the project (the first the
// actor reaches when projectID is nil), by external_id, else by number. Rows past
// MaxImportRows, rows that do not fit and rows that repeat a number or external id of an
// earlier row are refused, each named; the others are kept. Numbers on the do-not-call list are
// refused too.
func (s *Service) Import(ctx context.Context, act app.Actor, projectID *string, format string, data []byte) (ImportResult, error) {
	res := ImportResult{Object: "contact_import", Errors: []ImportError{}}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a byte-order mark
	if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		return res, fault.E(fault.CodeUnreadableImport, "The file is not text: send CSV or JSON lines in UTF-8.")
	}
	var rows []importRow
	var err error
	switch format {
	case FormatJSONL:
		rows, err = readJSONL(data, &res)
	default:
		rows, err = readCSV(data, &res)
	}
	if err != nil {
		return res, err
	}
	p, err := project(ctx, s.Store.Queries, act, projectID)
	if err != nil {
		return res, err
	}
	if err := app.Writable(p); err != nil {
		return res, err
	}
	// Refuse repeats within the file and numbers on the do-not-call list.
	seenNum, seenExt := map[string]int{}, map[string]int{}
	var ok []importRow
	for _, r := range rows {
		if len(r.problems) == 0 {
			if first, dup := seenNum[r.contact.Number]; dup {
				r.problems = append(r.problems, ImportError{Row: r.n, Field: "number", Code: "duplicate", Detail: fmt.Sprintf("Row %d has this number already.", first)})
			} else if first, dup := seenExt[r.contact.ExternalID]; dup && r.contact.ExternalID != "" {
				r.problems = append(r.problems, ImportError{Row: r.n, Field: "external_id", Code: "duplicate", Detail: fmt.Sprintf("Row %d has this external_id already.", first)})
			} else {
				seenNum[r.contact.Number] = r.n
				if r.contact.ExternalID != "" {
					seenExt[r.contact.ExternalID] = r.n
				}
			}
		}
		if len(r.problems) > 0 {
			res.Refused++
			res.Errors = append(res.Errors, r.problems...)
			continue
		}
		ok = append(ok, r)
	}
	dnc, err := s.onDNC(ctx, act.Org.ID, ok)
	if err != nil {
		return res, err
	}
	cs := make([]store.Contact, 0, len(ok))
	for _, r := range ok {
		if dnc[r.contact.Number] {
			res.Refused++
			res.Errors = append(res.Errors, ImportError{Row: r.n, Field: "number", Code: fault.CodeDoNotCall, Detail: r.contact.Number + " is on the organization's do-not-call list."})
			continue
		}
		cs = append(cs, r.contact)
	}
	for i := range res.Errors {
		res.Errors[i].Type = fault.TypeBase + fault.CodeValidationFailed
		if res.Errors[i].Code == fault.CodeDoNotCall {
			res.Errors[i].Type = fault.TypeBase + fault.CodeDoNotCall
		}
	}
	if len(cs) == 0 {
		if res.Refused > 0 {
			return res, refusedAll(res)
		}
		return res, nil
	}
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (ImportResult, error) {
		up, err := tx.Contacts().Upsert(ctx, act.Scope, p.ID, cs)
		if err != nil {
			return ImportResult{}, err
		}
		out := res
		for _, c := range up.Created {
			if c {
				out.Created++
			} else {
				out.Updated++
			}
		}
		return out, au.Record("contacts.imported", "project", string(p.ID), p.ID, map[string]any{
			"rows": out.Rows, "created": out.Created, "updated": out.Updated, "refused": out.Refused})
	})
}

// refusedAll is the answer of an import that keeps no row because every row was refused: 422
// validation_failed, errors[] naming each row and field (pointer /rows/<row>/<field>), and the
// counts as members rows and refused. A file of bad rows is never a 200 that stored nothing.
func refusedAll(res ImportResult) *fault.Error {
	ps := make([]jsoncheck.Problem, len(res.Errors))
	for i, e := range res.Errors {
		ptr := fmt.Sprintf("/rows/%d", e.Row)
		if e.Field != "" {
			ptr += "/" + jsoncheck.EscapePointer(e.Field)
		}
		ps[i] = jsoncheck.Problem{Pointer: ptr, Code: e.Code, Detail: fmt.Sprintf("Row %d: %s", e.Row, e.Detail)}
	}
	fe := app.Invalid(ps...)
	fe.Detail = fmt.Sprintf("Every row was refused (%d of %d); nothing was imported. %s", res.Refused, res.Rows, fe.Detail)
	fe.Extra = map[string]any{"rows": res.Rows, "refused": res.Refused}
	return fe
}

// onDNC returns which of the rows' numbers are on the organization's do-not-call list.
func (s *Service) onDNC(ctx context.Context, org store.OrgID, rows []importRow) (map[string]bool, error) {
	out := map[string]bool{}
	if len(rows) == 0 {
		return out, nil
	}
	// The list is usually far shorter than an import: read it whole, a page at a time.
	sc := store.OrgScope(org)
	after := ""
	for {
		page, err := s.Store.DoNotCallList().List(ctx, sc, "", store.Page{Limit: 100, After: after})
		if err != nil {
			return nil, err
		}
		for _, d := range page {
			out[d.Number] = true
		}
		if len(page) <= 100 {
			return out, nil
		}
		after = page[99].Number
	}
}

// csvColumns are the columns a CSV import knows; var.<name> and meta.<name> add variables and
// metadata.
var csvColumns = map[string]bool{"number": true, "name": true, "timezone": true, "external_id": true}

func readCSV(data []byte, res *ImportResult) ([]importRow, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	r.ReuseRecord = false
	header, err := r.Read()
	if errors.Is(err, io.EOF) {
		return nil, app.Invalid(jsoncheck.Problem{Pointer: "", Code: jsoncheck.CodeRequired, Detail: "The file is empty: it needs a header row naming its columns (number, name, timezone, external_id, var.<name>, meta.<name>)."})
	}
	if err != nil {
		return nil, fault.E(fault.CodeUnreadableImport, "The CSV header cannot be read: %v.", err)
	}
	cols := make([]string, len(header))
	hasNumber := false
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(h))
		switch {
		case h == "phone" || h == "to_number" || h == "phone_number":
			h = "number"
		case csvColumns[h], strings.HasPrefix(h, "var.") && len(h) > 4, strings.HasPrefix(h, "meta.") && len(h) > 5:
		default:
			return nil, app.Invalid(jsoncheck.Problem{Pointer: "", Code: "invalid_value", Detail: fmt.Sprintf(
				"Column %d of the header is %q, which an import does not know: use number, name, timezone, external_id, var.<name> and meta.<name>.", i+1, header[i])})
		}
		hasNumber = hasNumber || h == "number"
		cols[i] = h
	}
	if !hasNumber {
		return nil, app.Invalid(jsoncheck.Problem{Pointer: "", Code: jsoncheck.CodeRequired, Detail: "The header has no number column."})
	}
	var rows []importRow
	for n := 1; ; n++ {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		res.Rows++
		if n > MaxImportRows {
			res.Refused++
			if n == MaxImportRows+1 || len(res.Errors) < 1000 {
				res.Errors = append(res.Errors, ImportError{Row: n, Code: "too_many_rows", Detail: fmt.Sprintf("An import takes at most %d rows; this row and the ones after it were not imported.", MaxImportRows)})
			}
			continue
		}
		if err != nil {
			rows = append(rows, importRow{n: n, problems: []ImportError{{Row: n, Code: "malformed", Detail: fmt.Sprintf("The row cannot be read as CSV: %v.", err)}}})
			continue
		}
		if len(rec) != len(cols) {
			rows = append(rows, importRow{n: n, problems: []ImportError{{Row: n, Code: "malformed", Detail: fmt.Sprintf("The row has %d fields; the header names %d.", len(rec), len(cols))}}})
			continue
		}
		var number string
		var f ContactFields
		for i, v := range rec {
			v = strings.TrimSpace(v)
			switch c := cols[i]; {
			case c == "number":
				number = v
			case c == "name":
				f.Name = v
			case c == "timezone" && v != "":
				f.Timezone = &v
			case c == "external_id" && v != "":
				f.ExternalID = &v
			case strings.HasPrefix(c, "var.") && v != "":
				if f.Variables == nil {
					f.Variables = map[string]any{}
				}
				f.Variables[c[4:]] = v
			case strings.HasPrefix(c, "meta.") && v != "":
				if f.Metadata == nil {
					f.Metadata = map[string]any{}
				}
				f.Metadata[c[5:]] = v
			}
		}
		rows = append(rows, checkRow(n, number, f))
	}
	return rows, nil
}

// checkRow checks one row's values, naming each field that does not fit.
func checkRow(n int, number string, f ContactFields) importRow {
	c, ps := checkFields(number, f)
	row := importRow{n: n, contact: c}
	for _, p := range ps {
		field := strings.TrimPrefix(p.Pointer, "/")
		if strings.HasPrefix(field, "variables/") {
			field = "var." + strings.TrimPrefix(field, "variables/")
		}
		row.problems = append(row.problems, ImportError{Row: n, Field: field, Code: p.Code, Detail: p.Detail})
	}
	return row
}

// jsonlRow is one line of a JSON lines import.
type jsonlRow struct {
	Number string `json:"number"`
	ContactFields
}

func readJSONL(data []byte, res *ImportResult) ([]importRow, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var rows []importRow
	n := 0
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		n++
		res.Rows++
		if n > MaxImportRows {
			res.Refused++
			if n == MaxImportRows+1 || len(res.Errors) < 1000 {
				res.Errors = append(res.Errors, ImportError{Row: n, Code: "too_many_rows", Detail: fmt.Sprintf("An import takes at most %d rows; this row and the ones after it were not imported.", MaxImportRows)})
			}
			continue
		}
		var r jsonlRow
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			rows = append(rows, importRow{n: n, problems: []ImportError{{Row: n, Code: "malformed", Detail: fmt.Sprintf("The line is not a contact object: %v.", err)}}})
			continue
		}
		rows = append(rows, checkRow(n, r.Number, r.ContactFields))
	}
	if err := sc.Err(); err != nil {
		return nil, fault.E(fault.CodeUnreadableImport, "The file cannot be read as JSON lines: %v.", err)
	}
	return rows, nil
}
