package session

import (
	"errors"
	"reflect"
	"testing"
)

func TestRender(t *testing.T) {
	got, err := Render("Hi {{name}}, your balance is {{ balance }} (vip: {{vip}}). Bye {{name}}.", map[string]any{"name": "Ada", "balance": 12.5, "vip": true})
	if err != nil || got != "Hi Ada, your balance is 12.5 (vip: true). Bye Ada." {
		t.Fatalf("got %q, %v", got, err)
	}
	_, err = Render("{{a}} {{b}} {{a}} {{c}}", map[string]any{"b": "x"})
	var me *MissingVariablesError
	if !errors.As(err, &me) || !reflect.DeepEqual(me.Names, []string{"a", "c"}) {
		t.Fatalf("missing: %v", err)
	}
	if got := Placeholders("{{b}} {{a}} {{ b }} {{not valid}}"); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("placeholders: %v", got)
	}
}
