package analysis

import (
	"context"
	"encoding/json"

	"github.com/parley-voice/parley/session/llm"
)

// Fill asks the model to call tool with arguments fitting schema about the transcript, and asks
// once more when the answer does not fit (then the error wraps ErrNoFit). It is the
// post-call analysis's machinery for other users (issue 18: the evaluation judge). It returns
// the fitting arguments and the tokens used, also when it fails.
func Fill(ctx context.Context, client llm.Client, model, tool, prompt, transcript string, schema map[string]any) (json.RawMessage, int, int, error) {
	var u usage
	out, err := (&Service{}).fill(ctx, client, model, tool, prompt, transcript, schema, &u)
	return out, u.in, u.out, err
}
