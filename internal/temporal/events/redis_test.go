package events

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
	"hxd/internal/runtime"
)

const testRun = "0190f5c8-2f6b-7cc1-9a38-5d2f1c0e4b7a"

type testBundle struct {
	r      *Redis
	raw    *redis.Client
	prefix string
	key    string // stream key of testRun
}

// setup opens a Redis event stream on the test Redis under a key prefix
// unique to the test, and deletes the test's keys at cleanup.
func setup(t *testing.T, cfg Config) *testBundle {
	t.Helper()
	addr := hxtest.RedisAddr(t)
	cfg.KeyPrefix = hxtest.RedisKeyPrefix(t)
	r, err := Open(addr, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close()) })

	opt := &redis.Options{Addr: addr}
	if strings.Contains(addr, "://") {
		opt, err = redis.ParseURL(addr)
		require.NoError(t, err)
	}
	raw := redis.NewClient(opt)
	t.Cleanup(func() {
		ctx := context.Background()
		keys, err := raw.Keys(ctx, cfg.KeyPrefix+"*").Result()
		if err == nil && len(keys) > 0 {
			err = raw.Del(ctx, keys...).Err()
		}
		require.NoError(t, err, "delete test keys")
		require.NoError(t, raw.Close())
	})
	return &testBundle{r: r, raw: raw, prefix: cfg.KeyPrefix, key: cfg.KeyPrefix + testRun}
}

func event(id, typ string, data any) runtime.RunEvent {
	raw, err := json.Marshal(data)
	if err != nil {
		panic(err)
	}
	return runtime.RunEvent{
		Type: typ, Data: raw, SessionID: "s1", RunID: testRun,
		StepID: "st1", AttemptID: "a1", EventID: id,
	}
}

func deltas(ids ...string) []runtime.RunEvent {
	evs := make([]runtime.RunEvent, len(ids))
	for i, id := range ids {
		evs[i] = event(id, runtime.EventTextDelta, "text "+id)
	}
	return evs
}

func eventIDs(evs []runtime.RunEvent) []string {
	ids := make([]string, len(evs))
	for i, ev := range evs {
		ids[i] = ev.EventID
	}
	return ids
}

func cursorOf(t *testing.T, ev runtime.RunEvent) Cursor {
	t.Helper()
	n, err := strconv.ParseInt(ev.Cursor, 10, 64)
	require.NoError(t, err)
	c, err := CursorFromInt64(n)
	require.NoError(t, err)
	return c
}

func TestPublishRead(t *testing.T) {
	t.Parallel()
	tb := setup(t, Config{})
	ctx := context.Background()

	before := time.Now().UTC().Truncate(time.Millisecond)
	require.NoError(t, tb.r.Publish(ctx, testRun, deltas("e1", "e2", "e3")))
	require.NoError(t, tb.r.Publish(ctx, testRun, nil), "empty batch")
	last := event("e4", runtime.EventRunResult, map[string]any{"status": "completed"})
	last.RunID = "" // filled from the run ID
	last.Cursor = "99"
	require.NoError(t, tb.r.Publish(ctx, testRun, []runtime.RunEvent{last}))

	evs, next, gap, err := tb.r.Read(ctx, testRun, Start, 0)
	require.NoError(t, err)
	require.False(t, gap)
	require.Equal(t, []string{"e1", "e2", "e3", "e4"}, eventIDs(evs))
	after := time.Now().UTC()
	want := event("e1", runtime.EventTextDelta, "text e1")
	want.Cursor = evs[0].Cursor
	want.CreatedAt = evs[0].CreatedAt
	require.Equal(t, want, evs[0], "fields survive")
	// created_at is the time Redis appended the entry, from its ID.
	for _, ev := range evs {
		require.Equal(t, cursorOf(t, ev).Time(), ev.CreatedAt)
		require.False(t, ev.CreatedAt.Before(before), "created_at %s before publishing (%s)", ev.CreatedAt, before)
		require.False(t, ev.CreatedAt.After(after), "created_at %s after reading (%s)", ev.CreatedAt, after)
	}
	require.JSONEq(t, `{"status":"completed"}`, string(evs[3].Data))
	require.Equal(t, testRun, evs[3].RunID, "filled in")

	var prev Cursor
	for _, ev := range evs {
		c := cursorOf(t, ev)
		require.Greater(t, c, prev, "cursors increase")
		prev = c
	}
	require.Equal(t, cursorOf(t, evs[3]), next)

	// Paging: limit, then from the returned cursor.
	page, next1, gap, err := tb.r.Read(ctx, testRun, Start, 2)
	require.NoError(t, err)
	require.False(t, gap)
	require.Equal(t, []string{"e1", "e2"}, eventIDs(page))
	require.Equal(t, cursorOf(t, evs[1]), next1)
	page, next2, gap, err := tb.r.Read(ctx, testRun, next1, 1000)
	require.NoError(t, err)
	require.False(t, gap)
	require.Equal(t, []string{"e3", "e4"}, eventIDs(page))
	require.Equal(t, next, next2)

	// At the end: nothing, no gap, cursor unchanged.
	page, next3, gap, err := tb.r.Read(ctx, testRun, next, 10)
	require.NoError(t, err)
	require.False(t, gap)
	require.Empty(t, page)
	require.Equal(t, next, next3)

	// Another run's stream is separate; an unknown run reads empty.
	page, _, gap, err = tb.r.Read(ctx, "other-run", Start, 10)
	require.NoError(t, err)
	require.False(t, gap)
	require.Empty(t, page)
}

func TestPublishDedupe(t *testing.T) {
	t.Parallel()
	tb := setup(t, Config{})
	ctx := context.Background()

	require.NoError(t, tb.r.Publish(ctx, testRun, deltas("a", "b")))
	changed := event("b", runtime.EventTextDelta, "changed on re-send")
	require.NoError(t, tb.r.Publish(ctx, testRun, []runtime.RunEvent{changed, event("c", runtime.EventTextDelta, "text c")}))
	require.NoError(t, tb.r.Publish(ctx, testRun, deltas("a")))
	require.NoError(t, tb.r.Publish(ctx, testRun, deltas("d", "d", "a")), "duplicates within a batch")

	evs, _, _, err := tb.r.Read(ctx, testRun, Start, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c", "d"}, eventIDs(evs))
	require.JSONEq(t, `"text b"`, string(evs[1].Data), "first publish wins")
	require.Equal(t, int64(4), tb.raw.XLen(ctx, tb.key).Val())
	members, err := tb.raw.SMembers(ctx, tb.key+":ids").Result()
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"a", "b", "c", "d"}, members)
}

func TestPublishTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tt := range []struct {
		name      string
		retention time.Duration
		want      time.Duration
	}{
		{name: "default 24h", want: 24 * time.Hour},
		{name: "configured", retention: 90 * time.Second, want: 90 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t, Config{Retention: tt.retention})
			require.NoError(t, tb.r.Publish(ctx, testRun, deltas("x")))
			for _, key := range []string{tb.key, tb.key + ":ids"} {
				ttl, err := tb.raw.PTTL(ctx, key).Result()
				require.NoError(t, err)
				require.LessOrEqual(t, ttl, tt.want, key)
				require.Greater(t, ttl, tt.want-time.Minute, key)
			}
			// A re-send (nothing appended) still refreshes both TTLs.
			require.NoError(t, tb.raw.PExpire(ctx, tb.key, time.Minute).Err())
			require.NoError(t, tb.raw.PExpire(ctx, tb.key+":ids", time.Minute).Err())
			require.NoError(t, tb.r.Publish(ctx, testRun, deltas("x")))
			for _, key := range []string{tb.key, tb.key + ":ids"} {
				require.Greater(t, tb.raw.PTTL(ctx, key).Val(), tt.want-time.Minute, key)
			}
		})
	}
}

func TestReadGap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("trimmed", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, Config{})
		require.NoError(t, tb.r.Publish(ctx, testRun, deltas("e1", "e2", "e3", "e4")))
		evs, _, _, err := tb.r.Read(ctx, testRun, Start, 0)
		require.NoError(t, err)
		c1, c3 := cursorOf(t, evs[0]), cursorOf(t, evs[2])

		require.NoError(t, tb.raw.XTrimMaxLen(ctx, tb.key, 2).Err()) // e3, e4 stay
		got, next, gap, err := tb.r.Read(ctx, testRun, c1, 0)
		require.NoError(t, err)
		require.True(t, gap, "e2 was lost")
		require.Equal(t, []string{"e3", "e4"}, eventIDs(got), "from the stream's start")
		require.Equal(t, cursorOf(t, evs[3]), next)

		got, _, gap, err = tb.r.Read(ctx, testRun, c3, 0)
		require.NoError(t, err)
		require.False(t, gap, "the first entry is the cursor itself")
		require.Equal(t, []string{"e4"}, eventIDs(got))

		_, _, gap, err = tb.r.Read(ctx, testRun, Start, 0)
		require.NoError(t, err)
		require.False(t, gap, "Start never has a gap")
	})

	t.Run("foreign cursor", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, Config{})
		require.NoError(t, tb.r.Publish(ctx, testRun, deltas("e1")))
		got, _, gap, err := tb.r.Read(ctx, testRun, 5, 0) // "0-5": older than every entry
		require.NoError(t, err)
		require.True(t, gap)
		require.Equal(t, []string{"e1"}, eventIDs(got))
	})

	t.Run("expired", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, Config{Retention: 50 * time.Millisecond})
		require.NoError(t, tb.r.Publish(ctx, testRun, deltas("e1", "e2")))
		evs, next, _, err := tb.r.Read(ctx, testRun, Start, 0)
		require.NoError(t, err)
		require.Len(t, evs, 2)
		require.Eventually(t, func() bool {
			return tb.raw.Exists(ctx, tb.key, tb.key+":ids").Val() == 0
		}, 5*time.Second, 20*time.Millisecond, "both keys expire")

		got, next2, gap, err := tb.r.Read(ctx, testRun, next, 0)
		require.NoError(t, err)
		require.True(t, gap)
		require.Empty(t, got)
		require.Equal(t, Start, next2, "restart from the start")

		got, _, gap, err = tb.r.Read(ctx, testRun, Start, 0)
		require.NoError(t, err)
		require.False(t, gap)
		require.Empty(t, got)
	})
}

func TestPublishMaxLen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t, Config{MaxLen: 1})
	// Approximate trimming removes whole radix-tree nodes (100 entries by
	// default), so publish enough to fill a few.
	var batch []runtime.RunEvent
	for i := range 350 {
		batch = append(batch, event(fmt.Sprint("e", i), runtime.EventTextDelta, i))
	}
	require.NoError(t, tb.r.Publish(ctx, testRun, batch))
	n := tb.raw.XLen(ctx, tb.key).Val()
	require.Less(t, n, int64(350), "trimmed")
	require.Positive(t, n)
	c, err := ParseStreamID(tb.raw.XRangeN(ctx, tb.key, "-", "+", 1).Val()[0].ID)
	require.NoError(t, err)
	_, _, gap, err := tb.r.Read(ctx, testRun, c-1, 0)
	require.NoError(t, err)
	require.True(t, gap)
}

func TestPublishSeqOverflow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t, Config{Retention: time.Hour})
	// A last entry ID from the future at the highest sequence number
	// forces XADD * to the next sequence number, which has no cursor.
	future := time.Now().Add(time.Hour).UnixMilli()
	last := fmt.Sprintf("%d-%d", future, maxSeq)
	require.NoError(t, tb.raw.XAdd(ctx, &redis.XAddArgs{Stream: tb.key, ID: last, Values: []string{"event", `{"event_id":"seed"}`}}).Err())

	err := tb.r.Publish(ctx, testRun, deltas("e1"))
	require.ErrorIs(t, err, ErrCursorRange)
	require.NotErrorIs(t, err, ErrUnavailable)
	msgs := tb.raw.XRange(ctx, tb.key, "-", "+").Val()
	require.Len(t, msgs, 1, "the entry without a cursor was removed")
	require.Equal(t, last, msgs[0].ID)
	require.False(t, tb.raw.SIsMember(ctx, tb.key+":ids", "e1").Val(), "e1 not recorded: a re-send may succeed")
	require.Positive(t, tb.raw.PTTL(ctx, tb.key).Val(), "TTL still set")
}

func TestReadCorrupt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t, Config{})
	require.NoError(t, tb.raw.XAdd(ctx, &redis.XAddArgs{Stream: tb.key, Values: []string{"other", "x"}}).Err())
	_, _, _, err := tb.r.Read(ctx, testRun, Start, 0)
	require.ErrorIs(t, err, ErrCorrupt)

	require.NoError(t, tb.raw.Del(ctx, tb.key).Err())
	require.NoError(t, tb.raw.XAdd(ctx, &redis.XAddArgs{Stream: tb.key, Values: []string{"event", "{not json"}}).Err())
	_, _, _, err = tb.r.Read(ctx, testRun, Start, 0)
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestWatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t, Config{})

	start := time.Now()
	ok, err := tb.r.Watch(ctx, testRun, Start, 100*time.Millisecond)
	require.NoError(t, err)
	require.False(t, ok, "timeout without events")
	require.Less(t, time.Since(start), 2*time.Second)

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(100 * time.Millisecond)
		require.NoError(t, tb.r.Publish(ctx, testRun, deltas("e1")))
	}()
	start = time.Now()
	ok, err = tb.r.Watch(ctx, testRun, Start, 10*time.Second)
	wg.Wait()
	require.NoError(t, err)
	require.True(t, ok, "woken by the publish")
	require.Less(t, time.Since(start), 5*time.Second)

	evs, next, _, err := tb.r.Read(ctx, testRun, Start, 0)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	ok, err = tb.r.Watch(ctx, testRun, Start, time.Second)
	require.NoError(t, err)
	require.True(t, ok, "an entry after Start exists: no wait")
	ok, err = tb.r.Watch(ctx, testRun, next, 50*time.Millisecond)
	require.NoError(t, err)
	require.False(t, ok, "nothing after the last entry")

	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = tb.r.Watch(cctx, testRun, next, 10*time.Second)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the caller's deadline ends the wait")
	require.Less(t, time.Since(start), 5*time.Second)
}

func TestValidation(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		runID string
		ok    bool
	}{
		{name: "uuid", runID: testRun, ok: true},
		{name: "word chars", runID: "run_1.A-b", ok: true},
		{name: "max length", runID: strings.Repeat("a", MaxRunIDLen), ok: true},
		{name: "empty"},
		{name: "too long", runID: strings.Repeat("a", MaxRunIDLen+1)},
		{name: "colon (ids key clash)", runID: "run:ids"},
		{name: "space", runID: "a b"},
		{name: "slash", runID: "../x"},
		{name: "hash tag", runID: "{run}"},
		{name: "glob", runID: "run*"},
		{name: "newline", runID: "a\nb"},
		{name: "non-ascii", runID: "rün"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := ValidateRunID(tt.runID)
			if tt.ok {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, ErrInvalidRunID)
			}
		})
	}

	// Nothing below reaches Redis: an unreachable address is fine.
	r, err := Open("127.0.0.1:1", Config{})
	require.NoError(t, err)
	defer hxtest.Close(t, r)
	ctx := context.Background()
	require.ErrorIs(t, r.Publish(ctx, "a:b", deltas("e1")), ErrInvalidRunID)
	_, _, _, err = r.Read(ctx, "", Start, 0)
	require.ErrorIs(t, err, ErrInvalidRunID)
	_, err = r.Watch(ctx, "a b", Start, time.Second)
	require.ErrorIs(t, err, ErrInvalidRunID)
	_, _, _, err = r.Read(ctx, testRun, -1, 0)
	require.ErrorIs(t, err, ErrInvalidCursor)

	noID := event("", runtime.EventTextDelta, "x")
	require.ErrorIs(t, r.Publish(ctx, testRun, []runtime.RunEvent{noID}), ErrInvalidEvent)
	foreign := event("e1", runtime.EventTextDelta, "x")
	foreign.RunID = "another-run"
	require.ErrorIs(t, r.Publish(ctx, testRun, []runtime.RunEvent{foreign}), ErrInvalidEvent)
	require.ErrorIs(t, r.Publish(ctx, testRun, make([]runtime.RunEvent, MaxPublishBatch+1)), ErrInvalidEvent)

	for _, cfg := range []Config{{Retention: -time.Second}, {MaxLen: -1}, {KeyPrefix: "a{b}:"}, {PublishTimeout: -1}} {
		client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
		_, err := New(client, cfg)
		require.Error(t, err, "%+v", cfg)
		require.NoError(t, client.Close())
	}
}

// TestOutage: with Redis unreachable every call returns ErrUnavailable
// promptly instead of blocking.
func TestOutage(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now

	r, err := Open(addr, Config{})
	require.NoError(t, err)
	defer hxtest.Close(t, r)
	ctx := context.Background()

	start := time.Now()
	err = r.Publish(ctx, testRun, deltas("e1"))
	require.ErrorIs(t, err, ErrUnavailable)
	_, _, _, err = r.Read(ctx, testRun, 42, 0)
	require.ErrorIs(t, err, ErrUnavailable)
	_, err = r.Watch(ctx, testRun, Start, 5*time.Second)
	require.ErrorIs(t, err, ErrUnavailable)
	require.ErrorIs(t, r.Ping(ctx), ErrUnavailable)
	require.Less(t, time.Since(start), 3*time.Second, "closed port: prompt errors")

	// A server that accepts but never answers: bounded by the timeouts.
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = ln.Close() }() // on a failure; closed below otherwise, when a second Close fails
	var conns sync.WaitGroup
	conns.Add(1)
	go func() {
		defer conns.Done()
		var held []net.Conn
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	mute, err := Open(ln.Addr().String(), Config{PublishTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	start = time.Now()
	require.ErrorIs(t, mute.Publish(ctx, testRun, deltas("e1")), ErrUnavailable)
	_, _, _, err = mute.Read(ctx, testRun, Start, 0)
	require.ErrorIs(t, err, ErrUnavailable)
	require.Less(t, time.Since(start), 3*time.Second, "silent server: bounded by the timeouts")
	require.NoError(t, mute.Close())
	require.NoError(t, ln.Close())
	conns.Wait()
}
