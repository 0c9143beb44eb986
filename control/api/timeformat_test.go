package api

import (
	"reflect"
	"testing"
	"time"
)

// TestDocumentedTimesAreAppTime: every instant in a documented body or answer is an app.Time,
// which writes exactly six fractional digits, so no answer mixes precisions (a time.Time would
// write 0 to 9 digits as the value happens to have).
func TestDocumentedTimesAreAppTime(t *testing.T) {
	operations()
	timeT := reflect.TypeFor[time.Time]()
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type, path string)
	walk = func(ty reflect.Type, path string) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice || ty.Kind() == reflect.Array || ty.Kind() == reflect.Map {
			ty = ty.Elem()
		}
		if ty == timeT {
			t.Errorf("%s is a time.Time: use app.Time (six fractional digits)", path)
			return
		}
		if ty.Kind() != reflect.Struct || seen[ty] {
			return
		}
		seen[ty] = true
		if ty.PkgPath() == "time" {
			return
		}
		for i := range ty.NumField() {
			f := ty.Field(i)
			if f.Tag.Get("json") == "-" || (!f.IsExported() && !f.Anonymous) {
				continue
			}
			if f.Anonymous && f.Type.Kind() == reflect.Struct && f.Type.PkgPath() == "time" {
				continue // app.Time embeds time.Time and writes itself
			}
			walk(f.Type, ty.Name()+"."+f.Name)
		}
	}
	types := registeredSchemas()
	if len(types) < 20 {
		t.Fatalf("only %d documented types: the walk would prove nothing", len(types))
	}
	for _, ty := range types {
		walk(ty, ty.String())
	}
}
