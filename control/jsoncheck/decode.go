// Package jsoncheck reads untrusted JSON strictly and checks it against JSON Schema (draft
// 2020-12), reporting every problem by its place: an RFC 6901 JSON pointer, a stable code and a
// sentence for people.
//
// Decode refuses what encoding/json lets pass silently: bytes that are not UTF-8, a member name
// given twice in one object, and data after the value. Validator turns the errors of
// github.com/santhosh-tekuri/jsonschema/v6 into Problems. The package must never panic on
// input, never echo more than a short excerpt of a value back, and never do I/O.
package jsoncheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxDepth is how deeply arrays and objects may nest.
const MaxDepth = 64

// SyntaxError is JSON that cannot be read. Pointer names the innermost member or element that
// was being read; Line and Column (1-based, in bytes) and Offset name the byte.
type SyntaxError struct {
	Pointer string
	Offset  int64
	Line    int
	Column  int
	Msg     string
}

func (e *SyntaxError) Error() string {
	where := e.Pointer
	if where == "" {
		where = "the top level"
	}
	return fmt.Sprintf("malformed JSON at %s (line %d, column %d): %s", where, e.Line, e.Column, e.Msg)
}

// DuplicateError is an object that names a member twice (RFC 8259 §4 says names SHOULD be
// unique; a strict reader refuses, as the second value would silently win).
type DuplicateError struct {
	Pointer string // the repeated member
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("member %s appears more than once", e.Pointer)
}

// frame is one open array or object while decoding.
type frame struct {
	obj     map[string]any
	arr     []any
	isObj   bool
	key     string // the member whose value comes next (objects)
	wantKey bool   // objects: the next token is a member name
}

// Decode reads exactly one JSON value from data into the forms jsonschema validates:
// map[string]any, []any, string, json.Number, bool and nil. It fails with *SyntaxError or
// *DuplicateError.
func Decode(data []byte) (any, error) {
	if !utf8.Valid(data) {
		off := invalidUTF8(data)
		return nil, syntaxAt(data, "", off, "the body is not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []*frame
	var root any
	done := false
	pointer := func() string {
		var b strings.Builder
		for _, f := range stack {
			if f.isObj {
				if !f.wantKey {
					b.WriteByte('/')
					b.WriteString(EscapePointer(f.key))
				}
			} else {
				b.WriteByte('/')
				b.WriteString(strconv.Itoa(len(f.arr)))
			}
		}
		return b.String()
	}
	// place puts a finished value into its parent, or makes it the root.
	place := func(v any) {
		if len(stack) == 0 {
			root, done = v, true
			return
		}
		top := stack[len(stack)-1]
		if top.isObj {
			top.obj[top.key] = v
			top.wantKey = true
		} else {
			top.arr = append(top.arr, v)
		}
	}
	for !done {
		tok, err := dec.Token()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, syntaxAt(data, pointer(), int64(len(data)), "unexpected end of JSON")
			}
			// The decoder's offsets are relative to the token it was reading; a full scan by
			// encoding/json finds the same first error with an absolute offset.
			var se *json.SyntaxError
			if errors.As(json.Unmarshal(data, new(any)), &se) {
				return nil, syntaxAt(data, pointer(), se.Offset-1, strings.TrimPrefix(se.Error(), "json: ")) // Offset counts the bad byte
			}
			return nil, syntaxAt(data, pointer(), dec.InputOffset(), strings.TrimPrefix(err.Error(), "json: "))
		}
		if len(stack) > 0 {
			if top := stack[len(stack)-1]; top.isObj && top.wantKey {
				switch k := tok.(type) {
				case string:
					if _, dup := top.obj[k]; dup {
						top.key, top.wantKey = k, false
						return nil, &DuplicateError{Pointer: pointer()}
					}
					top.key, top.wantKey = k, false
					continue
				case json.Delim: // '}' closes the object
				default:
					return nil, syntaxAt(data, pointer(), dec.InputOffset(), "expected a member name")
				}
			}
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if len(stack) >= MaxDepth {
					return nil, syntaxAt(data, pointer(), dec.InputOffset(), fmt.Sprintf("nested more than %d levels deep", MaxDepth))
				}
				f := &frame{isObj: t == '{', wantKey: t == '{'}
				if f.isObj {
					f.obj = map[string]any{}
				} else {
					f.arr = []any{}
				}
				stack = append(stack, f)
			case '}', ']':
				f := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				if f.isObj {
					place(f.obj)
				} else {
					place(f.arr)
				}
			}
		default:
			place(t)
		}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, syntaxAt(data, "", dec.InputOffset(), "unexpected data after the JSON value")
	}
	return root, nil
}

// invalidUTF8 returns the offset of the first byte that is not UTF-8.
func invalidUTF8(data []byte) int64 {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n <= 1 {
			return int64(i)
		}
		i += n
	}
	return int64(len(data))
}

// syntaxAt builds a SyntaxError at byte offset off of data.
func syntaxAt(data []byte, ptr string, off int64, msg string) *SyntaxError {
	if off < 0 {
		off = 0
	}
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	line, col := 1, 1
	for _, c := range data[:off] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return &SyntaxError{Pointer: ptr, Offset: off, Line: line, Column: col, Msg: msg}
}

// EscapePointer escapes one reference token of a JSON pointer (RFC 6901 §3: ~ → ~0, / → ~1).
func EscapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// Pointer joins reference tokens into a JSON pointer.
func Pointer(tokens ...string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(EscapePointer(t))
	}
	return b.String()
}
