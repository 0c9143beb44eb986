package api

import (
	"context"
	"strings"
	"testing"

	"github.com/parley-voice/parley/control/fault"

	"github.com/parley-voice/parley/control/store"
)

var _ = register(scenario{"PhoneNumbers", testPhoneNumbers})

func testPhoneNumbers(t *testing.T, e engine) {
	st := e.open(t)
	w := newWorld(t, st, worldOpts{})
	ctx := context.Background()
	a := w.createAgent(t, string(w.p1.ID), "Support", "faq").Str("id")
	b := w.createAgent(t, string(w.p2.ID), "Elsewhere", "faq").Str("id")
	add := func(p store.ProjectID, number string) string {
		n, err := st.CreatePhoneNumber(ctx, store.NewPhoneNumber{OrgID: w.org.ID, ProjectID: p, Number: number, Trunk: "carrier-a"})
		if err != nil {
			t.Fatal(err)
		}
		return string(n.ID)
	}
	n1, n2, n3 := add(w.p1.ID, "+14155550101"), add(w.p1.ID, "+14155550102"), add(w.p2.ID, "+442071838750")
	patch := func(key, id string, body any) req {
		return req{method: "PATCH", path: "/v1/phone-numbers/" + id, key: key, body: body}
	}
	// Assign two numbers; the agent lists them in the order they were assigned.
	r := w.must(t, 200, patch(kLive, n2, map[string]any{"agent_id": a, "label": "Main line"}))
	if r.Str("agent_id") != a || r.Str("label") != "Main line" || r.Str("trunk") != "carrier-a" || r.Str("number") != "+14155550102" {
		t.Fatalf("assigned: %s", r)
	}
	// Ids may come in upper case (RFC 4122 §3: UUIDs compare case-insensitively).
	w.must(t, 200, patch(kLive, strings.ToUpper(n1), map[string]any{"agent_id": strings.ToUpper(a)}))
	ag := w.must(t, 200, req{method: "GET", path: "/v1/agents/" + a, key: kLive})
	nums := ag.JSON["phone_numbers"].([]any)
	if len(nums) != 2 || nums[0].(map[string]any)["id"] != n2 || nums[1].(map[string]any)["id"] != n1 {
		t.Fatalf("agent numbers: %v", nums)
	}
	// Label only leaves the agent; null clears it.
	if r := w.must(t, 200, patch(kLive, n1, map[string]any{"label": "Backup"})); r.Str("agent_id") != a || r.Str("label") != "Backup" {
		t.Fatalf("label: %s", r)
	}
	if r := w.must(t, 200, patch(kLive, n1, map[string]any{"agent_id": nil})); r.JSON["agent_id"] != nil || r.Str("label") != "Backup" {
		t.Fatalf("cleared: %s", r)
	}
	// Lists and filters.
	all := w.must(t, 200, req{method: "GET", path: "/v1/phone-numbers", key: kLive})
	if len(all.JSON["data"].([]any)) != 3 {
		t.Fatalf("numbers: %s", all)
	}
	if f := w.must(t, 200, req{method: "GET", path: "/v1/phone-numbers?agent_id=" + a, key: kLive}); len(f.JSON["data"].([]any)) != 1 {
		t.Fatalf("by agent: %s", f)
	}
	page := w.must(t, 200, req{method: "GET", path: "/v1/phone-numbers?project_id=" + string(w.p1.ID) + "&limit=1", key: kLive})
	next := w.must(t, 200, req{method: "GET", path: "/v1/phone-numbers?project_id=" + string(w.p1.ID) + "&limit=1&cursor=" + page.Str("next_cursor"), key: kLive})
	if next.JSON["data"].([]any)[0].(map[string]any)["id"] != n2 || next.JSON["has_more"] != false {
		t.Fatalf("second page: %s", next)
	}
	if n := w.must(t, 200, req{method: "GET", path: "/v1/phone-numbers", key: kNarrow}); len(n.JSON["data"].([]any)) != 2 {
		t.Fatalf("narrow key sees %s", n)
	}
	// Refusals.
	w.fails(t, 422, fault.CodeAgentOtherProject, patch(kLive, n1, map[string]any{"agent_id": b}))
	w.fails(t, 404, fault.CodeAgentNotFound, patch(kLive, n1, map[string]any{"agent_id": "0190a6f0-0000-7000-8000-0000000000aa"}))
	w.fails(t, 404, fault.CodeAgentNotFound, patch(kNarrow, n1, map[string]any{"agent_id": b}))
	w.fails(t, 404, fault.CodePhoneNumberNotFound, patch(kNarrow, n3, map[string]any{"label": "x"}))
	w.fails(t, 404, fault.CodePhoneNumberNotFound, patch(kLive, "0190a6f0-0000-7000-8000-0000000000aa", map[string]any{"label": "x"}))
	w.fails(t, 403, fault.CodeLiveKeyRequired, patch(kTest, n1, map[string]any{"label": "x"}))
	w.fails(t, 403, fault.CodeMissingPermission, patch(kReadOnly, n1, map[string]any{"label": "x"}))
	w.fails(t, 422, fault.CodeValidationFailed, patch(kLive, n1, map[string]any{})).hasError(t, "", "too_short")
	w.fails(t, 422, fault.CodeValidationFailed, patch(kLive, n1, map[string]any{"number": "+15550000000"})).hasError(t, "/number", "unknown_field")
	w.fails(t, 422, fault.CodeValidationFailed, patch(kLive, n1, map[string]any{"label": strings.Repeat("l", 121)})).hasError(t, "/label", "too_long")
	w.fails(t, 422, fault.CodeValidationFailed, patch(kLive, n1, map[string]any{"agent_id": "agent-1"})).hasError(t, "/agent_id", "invalid_format")
	w.fails(t, 413, fault.CodeBodyTooLarge, patch(kLive, n1, `{"label": "`+strings.Repeat("x", 65<<10)+`"}`))
	if err := st.SetProjectFrozen(ctx, w.p1.ID, true); err != nil {
		t.Fatal(err)
	}
	w.fails(t, 409, fault.CodeProjectFrozen, patch(kLive, n1, map[string]any{"label": "x"}))
}
