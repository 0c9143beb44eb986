package jsoncheck

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	v, err := Decode([]byte(` {"a": [1, 2.5, "x", true, null, {"b/c~": {}}], "n": -0.0e1} `))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": []any{json.Number("1"), json.Number("2.5"), "x", true, nil, map[string]any{"b/c~": map[string]any{}}}, "n": json.Number("-0.0e1")}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("Decode = %#v", v)
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := []struct {
		in       string
		pointer  string
		line     int
		col      int
		dup      bool
		contains string
	}{
		{in: `{"a": 1,}`, pointer: "", line: 1, col: 9},
		{in: `{"a": {"b": [1, 2, }]}}`, pointer: "/a/b/2", line: 1, col: 20},
		{in: "{\n  \"agent\": {\n    \"name\": tru\n  }\n}", pointer: "/agent/name", line: 3, col: 16},
		{in: `{"a": 1} {"b": 2}`, pointer: "", contains: "after the JSON value"},
		{in: `{"a": 1`, pointer: "", contains: "unexpected end"},
		{in: ``, pointer: "", contains: "unexpected end"},
		{in: `{"x": 1, "x": 2}`, pointer: "/x", dup: true},
		{in: `{"o": {"a/b": 1, "a/b": 2}}`, pointer: "/o/a~1b", dup: true},
		{in: "{\"a\": \"\xff\"}", pointer: "", contains: "UTF-8", line: 1, col: 8},
		{in: strings.Repeat("[", 70) + strings.Repeat("]", 70), contains: "nested", pointer: strings.Repeat("/0", 64)},
	}
	for _, c := range cases {
		_, err := Decode([]byte(c.in))
		if c.dup {
			var de *DuplicateError
			if !errors.As(err, &de) || de.Pointer != c.pointer {
				t.Errorf("Decode(%q) = %v, want a duplicate at %s", c.in, err, c.pointer)
			}
			continue
		}
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Decode(%q) = %v, want a SyntaxError", c.in, err)
			continue
		}
		if se.Pointer != c.pointer || (c.line != 0 && (se.Line != c.line || se.Column != c.col)) || !strings.Contains(se.Error(), c.contains) {
			t.Errorf("Decode(%q) = %+v (%v), want pointer %q line %d col %d containing %q", c.in, se, se, c.pointer, c.line, c.col, c.contains)
		}
	}
}

func TestValidate(t *testing.T) {
	schema, _ := Decode([]byte(`{
		"type": "object", "additionalProperties": false, "required": ["id", "n"],
		"properties": {
			"id": {"type": "string", "format": "uuid"},
			"n": {"type": "integer", "minimum": 1, "maximum": 100},
			"s": {"type": "string", "maxLength": 3},
			"e": {"enum": ["a", "b"]},
			"o": {"anyOf": [{"type": "string", "minLength": 2}, {"type": "null"}]},
			"l": {"type": "array", "uniqueItems": true, "items": {"type": "string"}}
		}}`))
	v, err := Compile(map[string]any{"https://t/s.json": schema}, "https://t/s.json")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		doc     string
		pointer string
		code    string
	}{
		{`{"id": "0190a6f0-0000-7000-8000-0000000000aa", "n": 5, "zz": 1}`, "/zz", CodeUnknownField},
		{`{"n": 5}`, "/id", CodeRequired},
		{`{"id": "nope", "n": 5}`, "/id", CodeInvalidFormat},
		{`{"id": "0190a6f0-0000-7000-8000-0000000000aa", "n": 0}`, "/n", CodeOutOfRange},
		{`{"id": "0190a6f0-0000-7000-8000-0000000000aa", "n": 1.5}`, "/n", CodeInvalidType},
		{`{"id": "0190a6f0-0000-7000-8000-0000000000aa", "n": "5"}`, "/n", CodeInvalidType},
		{`{"id": "0190a6f0-0000-7000-8000-0000000000aa", "n": 5, "s": "long"}`, "/s", CodeTooLong},
		{`{"id": "0190a6f0-0000-7000-8000-0000000000aa", "n": 5, "e": "c"}`, "/e", CodeInvalidValue},
		{`{"id": "0190a6f0-0000-7000-8000-0000000000aa", "n": 5, "o": "x"}`, "/o", CodeTooShort},
		{`{"id": "0190a6f0-0000-7000-8000-0000000000aa", "n": 5, "o": 1}`, "/o", CodeInvalidType},
		{`{"id": "0190a6f0-0000-7000-8000-0000000000aa", "n": 5, "l": ["a", "a"]}`, "/l/1", CodeNotUnique},
		{`[]`, "", CodeInvalidType},
	}
	for _, c := range cases {
		doc, err := Decode([]byte(c.doc))
		if err != nil {
			t.Fatal(err)
		}
		ps := v.Validate(doc)
		if len(ps) != 1 || ps[0].Pointer != c.pointer || ps[0].Code != c.code || ps[0].Detail == "" {
			t.Errorf("Validate(%s) = %+v, want one %s at %q", c.doc, ps, c.code, c.pointer)
		}
	}
	ok, _ := Decode([]byte(`{"id": "0190a6f0-0000-7000-8000-0000000000aa", "n": 100, "o": null, "l": ["a"]}`))
	if ps := v.Validate(ok); len(ps) != 0 {
		t.Fatalf("valid document refused: %+v", ps)
	}
}

func TestPointer(t *testing.T) {
	if p := Pointer("a/b", "c~d", "0"); p != "/a~1b/c~0d/0" {
		t.Fatalf("Pointer = %q", p)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":null}]}`, `[`, `{"a":1,"a":2}`, `"x"`, `1e999`, "{\"\xff\":1}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Decode(data)
		if err == nil && !json.Valid(data) {
			t.Fatalf("Decode accepted what encoding/json calls invalid: %q", data)
		}
		if err != nil {
			var se *SyntaxError
			var de *DuplicateError
			if !errors.As(err, &se) && !errors.As(err, &de) {
				t.Fatalf("Decode error of an unexpected type %T: %v", err, err)
			}
			return
		}
		if _, err := json.Marshal(v); err != nil {
			t.Fatalf("decoded value does not marshal: %v", err)
		}
	})
}
