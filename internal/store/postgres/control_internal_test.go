package postgres

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestControlCache(t *testing.T) {
	t.Parallel()
	var c controlCache
	_, ok := c.get("s")
	require.False(t, ok, "empty")

	t0 := time.Now()
	c.put("s", "paused", t0)
	v, ok := c.get("s")
	require.True(t, ok)
	require.Equal(t, "paused", v)

	c.put("s", "", t0.Add(-time.Millisecond))
	v, _ = c.get("s")
	require.Equal(t, "paused", v, "an older read does not replace a newer one")

	c.forget("s")
	_, ok = c.get("s")
	require.False(t, ok, "a local write drops the entry")
	c.put("s", "paused", t0)
	_, ok = c.get("s")
	require.False(t, ok, "a read that started before the write does not come back")
	c.put("s", "cancelled", time.Now())
	v, ok = c.get("s")
	require.True(t, ok, "a read after the write does")
	require.Equal(t, "cancelled", v)

	c.put("old", "paused", time.Now().Add(-controlFresh))
	_, ok = c.get("old")
	require.False(t, ok, "stale")

	// Entries of sessions never read again are swept.
	for i := range controlSweepSize {
		c.put(string(rune('a'+i%26))+time.Duration(i).String(), "", time.Now().Add(-controlFresh))
	}
	c.put("new", "", time.Now())
	require.Less(t, len(c.m), controlSweepSize)
}
