package fault

import (
	"encoding/json"
	"testing"
)

func TestFieldErrorJSON(t *testing.T) {
	cases := []struct {
		in   FieldError
		want string
	}{
		{FieldError{Pointer: "/name", Code: "too_long", Detail: "d"}, `{"pointer":"/name","code":"too_long","detail":"d"}`},
		{FieldError{Pointer: "", Code: "required", Detail: "d"}, `{"pointer":"","code":"required","detail":"d"}`},
		{FieldError{Parameter: "limit", Code: "invalid_parameter", Detail: "d"}, `{"parameter":"limit","code":"invalid_parameter","detail":"d"}`},
	}
	for _, c := range cases {
		b, err := json.Marshal(c.in)
		if err != nil || string(b) != c.want {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", c.in, b, err, c.want)
		}
	}
}
