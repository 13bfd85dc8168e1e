package model

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBackoff(t *testing.T) {
	t.Parallel()

	fixed := func(v float64) func() float64 { return func() float64 { return v } }
	tests := []struct {
		name       string
		attempt    int
		base, max  float64
		retryAfter float64
		rnd        func() float64
		want       time.Duration
	}{
		{name: "first attempt is base", attempt: 1, base: 0.5, max: 60, want: 500 * time.Millisecond},
		{name: "doubles per attempt", attempt: 2, base: 0.5, max: 60, want: time.Second},
		{name: "fourth attempt", attempt: 4, base: 0.5, max: 60, want: 4 * time.Second},
		{name: "capped at max", attempt: 10, base: 0.5, max: 60, want: 60 * time.Second},
		{name: "attempt below 1 counts as 1", attempt: 0, base: 2, max: 60, want: 2 * time.Second},
		{name: "huge attempt stays capped", attempt: 5000, base: 1, max: 30, want: 30 * time.Second},
		{name: "no cap when max is 0", attempt: 11, base: 1, max: 0, want: 1024 * time.Second},
		{name: "no cap saturates", attempt: 5000, base: 1, max: 0, want: time.Duration(math.MaxInt64)},
		{name: "zero base", attempt: 5000, base: 0, max: 10, want: 0},
		{name: "negative base counts as 0", attempt: 3, base: -1, max: 10, want: 0},
		{name: "jitter 0 keeps full wait", attempt: 3, base: 1, max: 60, rnd: fixed(0), want: 4 * time.Second},
		{name: "jitter 0.5 takes a quarter off", attempt: 3, base: 1, max: 60, rnd: fixed(0.5), want: 3 * time.Second},
		{name: "jitter near 1 halves", attempt: 3, base: 1, max: 60, rnd: fixed(1), want: 2 * time.Second},
		{name: "jitter applies after the cap", attempt: 10, base: 1, max: 8, rnd: fixed(1), want: 4 * time.Second},
		{name: "jitter out of range is clamped high", attempt: 1, base: 4, max: 60, rnd: fixed(7), want: 2 * time.Second},
		{name: "jitter out of range is clamped low", attempt: 1, base: 4, max: 60, rnd: fixed(-3), want: 4 * time.Second},
		{name: "jitter NaN counts as 0", attempt: 1, base: 4, max: 60, rnd: fixed(math.NaN()), want: 4 * time.Second},
		{name: "retry-after is a floor", attempt: 1, base: 0.5, max: 60, retryAfter: 7, want: 7 * time.Second},
		{name: "retry-after below computed", attempt: 5, base: 1, max: 60, retryAfter: 3, want: 16 * time.Second},
		{name: "retry-after floor against jitter", attempt: 3, base: 1, max: 60, retryAfter: 3, rnd: fixed(1), want: 3 * time.Second},
		{name: "retry-after above max is honoured", attempt: 2, base: 1, max: 10, retryAfter: 90, want: 90 * time.Second},
		{name: "fractional retry-after", attempt: 1, base: 0.1, max: 10, retryAfter: 1.5, want: 1500 * time.Millisecond},
		{name: "negative retry-after ignored", attempt: 1, base: 1, max: 10, retryAfter: -5, want: time.Second},
		{name: "NaN retry-after ignored", attempt: 1, base: 1, max: 10, retryAfter: math.NaN(), want: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Backoff(tt.attempt, tt.base, tt.max, tt.retryAfter, tt.rnd)
			require.Equal(t, tt.want, got)
			if tt.max > 0 && !math.IsNaN(tt.retryAfter) {
				require.LessOrEqual(t, got, secondsToDuration(math.Max(tt.max, tt.retryAfter)))
			}
		})
	}
}

func TestBackoffJitterBounds(t *testing.T) {
	t.Parallel()
	for i := 0; i <= 100; i++ {
		r := float64(i) / 100
		got := Backoff(3, 1, 60, 0, func() float64 { return r })
		require.GreaterOrEqual(t, got, 2*time.Second)
		require.LessOrEqual(t, got, 4*time.Second)
	}
}
