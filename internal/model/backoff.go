package model

import (
	"math"
	"time"
)

// maxBackoffSeconds is the largest wait Backoff can express as a
// time.Duration without overflowing.
var maxBackoffSeconds = float64(math.MaxInt64) / float64(time.Second)

// Backoff returns the wait before attempt number attempt+1, after attempt
// number attempt (1-based) failed with a transient error (REFERENCE §4.1,
// RetryPolicy.wait_for).
//
//   - The base wait is baseSeconds * 2^(attempt-1); attempt < 1 counts as 1.
//   - It is capped at maxSeconds; maxSeconds <= 0 means no cap.
//   - Jitter is downward only: the capped wait is multiplied by
//     1 - 0.5*rnd(), a factor in (0.5, 1] for rnd() in [0, 1). rnd is
//     injected (STYLE G14); a nil rnd means no jitter. Values of rnd outside
//     [0, 1] are clamped.
//   - A positive retryAfter (the provider's Retry-After hint, seconds) is a
//     floor: the result is max(retryAfter, jittered wait). The cap does not
//     cut the provider's hint, so the result never exceeds
//     max(maxSeconds, retryAfter); callers that cannot wait that long should
//     give up instead of retrying early.
//
// Negative or NaN inputs count as 0. The result saturates at the largest
// time.Duration.
func Backoff(attempt int, baseSeconds, maxSeconds, retryAfter float64, rnd func() float64) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	var wait float64
	if base := nonNegative(baseSeconds); base > 0 {
		wait = base * math.Pow(2, float64(attempt-1)) // may be +Inf: capped or saturated below
	}
	if maxSeconds > 0 && wait > maxSeconds {
		wait = maxSeconds
	}
	if rnd != nil {
		r := rnd()
		switch {
		case math.IsNaN(r) || r < 0:
			r = 0
		case r > 1:
			r = 1
		}
		wait *= 1 - 0.5*r
	}
	if ra := nonNegative(retryAfter); ra > wait {
		wait = ra
	}
	return secondsToDuration(wait)
}

// nonNegative maps negative and NaN values to 0.
func nonNegative(v float64) float64 {
	if math.IsNaN(v) || v < 0 {
		return 0
	}
	return v
}

// secondsToDuration converts seconds to a Duration, saturating at the largest
// Duration (also for +Inf).
func secondsToDuration(s float64) time.Duration {
	if s >= maxBackoffSeconds {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(s * float64(time.Second))
}
