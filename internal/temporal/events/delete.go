package events

import (
	"context"
	"fmt"
)

// Deleted counts what Delete removed.
type Deleted struct {
	// Events is the number of stream entries.
	Events int
	// Bytes is the memory Redis reported for the stream and its dedupe
	// set (MEMORY USAGE; 0 when Redis does not say).
	Bytes int64
}

// Delete deletes the event stream of runID and its dedupe set (retention,
// issue 23), counting what it held. Idempotent: a missing stream counts
// nothing. Errors wrap ErrUnavailable (or ErrInvalidRunID).
func (r *Redis) Delete(ctx context.Context, runID string) (Deleted, error) {
	key, err := r.StreamKey(runID)
	if err != nil {
		return Deleted{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.ReadTimeout)
	defer cancel()
	var out Deleted
	n, err := r.client.XLen(ctx, key).Result()
	if err != nil {
		return Deleted{}, fmt.Errorf("%w: xlen %s: %w", ErrUnavailable, runID, err)
	}
	out.Events = int(n)
	for _, k := range []string{key, key + ":ids"} {
		if b, err := r.client.MemoryUsage(ctx, k).Result(); err == nil {
			out.Bytes += b
		}
	}
	if err := r.client.Del(ctx, key, key+":ids").Err(); err != nil {
		return Deleted{}, fmt.Errorf("%w: del %s: %w", ErrUnavailable, runID, err)
	}
	return out, nil
}
