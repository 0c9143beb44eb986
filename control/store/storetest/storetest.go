// Package storetest is the conformance suite of package store: every behaviour of the store,
// written once and run against each engine (SQLite and PostgreSQL), so the two cannot drift.
//
// It is for tests only and must never be imported by production code.
package storetest

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/parley-voice/parley/control/store"
)

// Opener returns a fresh, empty, unmigrated store that nothing else uses, closed when t ends.
type Opener func(t *testing.T) *store.Store

// Run runs every conformance test as a parallel subtest of t, each on its own store from open.
func Run(t *testing.T, open func(t *testing.T) *store.Store) {
	tests := []struct {
		name string
		fn   func(*testing.T, Opener)
	}{
		{"Open", testOpen},
		{"MigrateIdempotent", testMigrateIdempotent},
		{"MigrateConcurrent", testMigrateConcurrent},
		{"UnmigratedRefused", testUnmigratedRefused},
		{"SchemaTooNew", testSchemaTooNew},
		{"Orgs", testOrgs},
		{"OrgNames", testOrgNames},
		{"OrgTransferAllow", testOrgTransferAllow}, // issue 22 item 7
		{"Credit", testCredit},
		{"CreditLedger", testCreditLedger},
		{"CreditReservations", testCreditReservations},
		{"AuditLog", testAuditLog},
		{"Projects", testProjects},
		{"KeyCreateLookup", testKeyCreateLookup},
		{"KeySecretNotStored", testKeySecretNotStored},
		{"KeyRevoke", testKeyRevoke},
		{"KeyExpiryReachScopes", testKeyExpiryReachScopes},
		{"KeyRefused", testKeyRefused},
		{"KeyTouch", testKeyTouch},
		{"Bootstrap", testBootstrap},
		{"BootstrapConcurrent", testBootstrapConcurrent},
		{"AuditList", testAuditList},
		{"AuditRefused", testAuditRefused},
		{"TxCommit", testTxCommit},
		{"TxRollback", testTxRollback},
		{"TxPanic", testTxPanic},
		{"Timestamps", testTimestamps},
		{"ConcurrentWriters", testConcurrentWriters},
		{"Agents", testAgents},
		{"Conversations", testConversations},
		{"ScheduledCallsScope", testScheduledCallsScope},
		{"StartLookupsScope", testStartLookupsScope},
		{"InboundRoute", testInboundRoute},     // issue 20
		{"KnowledgeScope", testKnowledgeScope}, // issue 16
		{"KnowledgeIndex", testKnowledgeIndex},
		{"KnowledgeCommonTerms", testKnowledgeCommonTerms},
		{"WhatsApp", testWhatsApp}, // issue 19
	}
	tests = append(tests, jobsTests...)
	tests = append(tests, webhookTests...)    // issue 14
	tests = append(tests, campaignTests...)   // issue 15
	tests = append(tests, vaultTests...)      // issue 17
	tests = append(tests, toolsTests...)      // issue 17
	tests = append(tests, evaluationTests...) // issue 18
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open)
		})
	}
}

// migrated opens a store and migrates it.
func migrated(t *testing.T, open Opener) *store.Store {
	t.Helper()
	s := open(t)
	if _, err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

// must fails t on err.
func must[T any](t *testing.T, what string) func(T, error) T {
	t.Helper()
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
}

// wantErr fails t unless err wraps target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want one wrapping %v", what, err, target)
	}
}

// sameJSON fails t unless got and want encode to the same JSON (times compare by instant and zone).
func sameJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	g, err1 := json.Marshal(got)
	w, err2 := json.Marshal(want)
	if err1 != nil || err2 != nil {
		t.Fatalf("%s: marshal: %v %v", what, err1, err2)
	}
	if string(g) != string(w) {
		t.Fatalf("%s:\n got %s\nwant %s", what, g, w)
	}
}

// newOrg creates an organization named name.
func newOrg(t *testing.T, q *store.Store, name string) store.Org {
	t.Helper()
	return must[store.Org](t, "CreateOrg "+name)(q.CreateOrg(t.Context(), name))
}

// newProject creates a project named name.
func newProject(t *testing.T, q *store.Store, org store.OrgID, name string) store.Project {
	t.Helper()
	return must[store.Project](t, "CreateProject "+name)(q.CreateProject(t.Context(), org, name))
}
