package webrtc

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
)

// Each error knows its wire code, HTTP status and close code; wrapped ones keep them, and
// anything else becomes a generic internal error that says nothing of its cause.
func TestErrorClassification(t *testing.T) {
	for _, tc := range []struct {
		err    error
		code   string
		status int
		close  int
	}{
		{ErrTokenExpired, "token_expired", http.StatusUnauthorized, 4401},
		{ErrTokenUsed, "token_used", http.StatusUnauthorized, 4401},
		{ErrTokenInvalid, "token_invalid", http.StatusUnauthorized, 4401},
		{fmt.Errorf("%w (a listen token)", ErrTokenOtherCall), "token_wrong_call", http.StatusForbidden, 4403},
		{ErrCallNotFound, "call_not_found", http.StatusNotFound, 4404},
		{ErrNotLive, "conversation_not_live", http.StatusNotFound, 4404},
		{fmt.Errorf("%w: bad SDP", ErrMedia), "media_failed", http.StatusBadRequest, 4415},
		{errors.New("database password is hunter2"), "internal", http.StatusInternalServerError, 1011},
	} {
		e := asError(tc.err)
		if e.Code != tc.code || e.Status != tc.status || e.Close != tc.close {
			t.Errorf("%v: %+v", tc.err, e)
		}
		if m := errorMessage(tc.err); m.Code != tc.code || m.Message != e.Detail {
			t.Errorf("%v: message %+v", tc.err, m)
		}
	}
}
