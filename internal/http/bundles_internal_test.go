package http

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/http/api"
	"hxd/internal/hxbundle"
)

// TestBundleJobsBound: with every slot taken, an upload waits, and gives up
// when its request ends; once a slot is free, it is verified.
func TestBundleJobsBound(t *testing.T) {
	t.Parallel()
	s := &Server{log: slog.New(slog.DiscardHandler), limits: hxbundle.DefaultLimits, spoolDir: t.TempDir(),
		bundleJobs: make(chan struct{}, 1)}
	garbage := []byte("not a zip")
	verify := func(ctx context.Context) (api.VerifyBundleResponseObject, error) {
		return s.VerifyBundle(ctx, api.VerifyBundleRequestObject{Body: bytes.NewReader(garbage)})
	}
	playback := func(ctx context.Context) (api.PlaybackBundleResponseObject, error) {
		return s.PlaybackBundle(ctx, api.PlaybackBundleRequestObject{Body: bytes.NewReader(garbage)})
	}

	release, err := s.bundleJob(t.Context()) // the one slot
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err = verify(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = playback(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "playback waits before it reads the bundle")

	// A waiting upload goes on as soon as the slot is released.
	done := make(chan error, 1)
	go func() {
		resp, err := verify(t.Context())
		if _, ok := resp.(api.VerifyBundle200JSONResponse); err == nil && !ok {
			err = fmt.Errorf("answer %T", resp)
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("verified while every slot was taken (err %v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	require.NoError(t, <-done)
	_, err = playback(t.Context())
	var ie *hxbundle.InvalidError
	require.ErrorAs(t, err, &ie)
	require.Len(t, s.bundleJobs, 0, "every slot is released")
}
