package temporal

import (
	"context"

	"hxd/internal/model"
	"hxd/internal/runtime"
)

// callModel makes the model activity's provider call. When the run streams
// (in.Stream), the provider can (model.Streamer) and the agent has no
// response middleware (its text is emitted post-middleware after the
// call), each text or thinking piece is published as a text_delta /
// thinking_delta event as it arrives, after the activity's events so far
// (an attempt_reset), and streamed is true: the caller then publishes no
// text_delta of its own. Publishing never fails the call (events are
// provisional, see publish).
func (a *Activities) callModel(ctx context.Context, in ModelInput, b *binding, provider model.Provider, req *model.Request, own *deltaEvents, attempt int) (resp *model.Response, streamed bool, err error) {
	s, ok := provider.(model.Streamer)
	if !in.Stream || !ok || len(b.def.ResponseMiddleware) > 0 {
		resp, err = provider.Complete(ctx, req)
		return resp, false, err
	}
	resp, err = s.CompleteStream(ctx, req, func(d model.Delta) {
		typ := runtime.EventTextDelta
		switch {
		case d.Text == "":
			return
		case d.Kind == model.DeltaThinking:
			typ = runtime.EventThinkingDelta
		case d.Kind != model.DeltaText:
			return
		}
		own.add(typ, d.Text, attempt)
		a.publish(ctx, own.unsent())
	})
	return resp, true, err
}
