package postgres

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGroupContext: a group's transaction ends at the latest deadline of
// its boundaries' callers, at most opTimeout from now, and at opTimeout
// when any caller has no deadline.
func TestGroupContext(t *testing.T) {
	t.Parallel()
	now := time.Now()
	soon, later := now.Add(time.Second), now.Add(2*time.Second)
	far := now.Add(opTimeout + time.Hour)
	tests := []struct {
		name      string
		deadlines []time.Time
		want      time.Time // zero: now + opTimeout
	}{
		{"one", []time.Time{soon}, soon},
		{"latest of several", []time.Time{later, soon}, later},
		{"a caller without deadline", []time.Time{soon, {}}, time.Time{}},
		{"none", []time.Time{{}}, time.Time{}},
		{"capped at opTimeout", []time.Time{far}, time.Time{}},
		{"already past", []time.Time{now.Add(-time.Second)}, now.Add(-time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			batch := make([]*commitReq, len(tt.deadlines))
			for i, d := range tt.deadlines {
				batch[i] = &commitReq{deadline: d}
			}
			start := time.Now()
			ctx, cancel := groupContext(batch)
			defer cancel()
			got, ok := ctx.Deadline()
			require.True(t, ok)
			if tt.want.IsZero() {
				require.WithinRange(t, got, start.Add(opTimeout), time.Now().Add(opTimeout))
				return
			}
			require.Equal(t, tt.want, got)
		})
	}
}
