package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"go.opentelemetry.io/otel/trace"

	"hxd/internal/runtime"
)

// Defaults of Config.
const (
	DefaultKeyPrefix      = "harness:events:"
	DefaultRetention      = 24 * time.Hour
	DefaultPublishTimeout = 2 * time.Second
	DefaultReadTimeout    = 2 * time.Second
	DefaultWatchTimeout   = 10 * time.Second
	// MaxWatchTimeout bounds Watch's blocking time.
	MaxWatchTimeout = time.Minute
	// MaxReadLimit is the most entries one Read returns.
	MaxReadLimit = 1000
	// MaxPublishBatch is the most events one Publish accepts.
	MaxPublishBatch = 1000
	// MaxRunIDLen bounds a run ID used in a key.
	MaxRunIDLen = 128
)

var (
	// ErrUnavailable wraps every failure to reach Redis (connection,
	// timeout, server error). Callers log and ignore it on Publish and turn
	// it into a public "gap" event on Read.
	ErrUnavailable = errors.New("events: redis unavailable")
	// ErrInvalidRunID is returned for a run ID that is empty, longer than
	// MaxRunIDLen or has characters other than ASCII letters, digits, '-',
	// '_' and '.'.
	ErrInvalidRunID = errors.New("events: invalid run id")
	// ErrInvalidEvent is returned by Publish for an event without an
	// event_id, for another run, or for a batch over MaxPublishBatch.
	ErrInvalidEvent = errors.New("events: invalid event")
	// ErrCorrupt is returned by Read for a stream entry that is not an
	// event.
	ErrCorrupt = errors.New("events: corrupt stream entry")
)

// Config configures a Redis event stream. Zero fields take their defaults.
type Config struct {
	// KeyPrefix precedes the run ID in the stream key. Optional; default:
	// "harness:events:" (tests use a unique prefix).
	KeyPrefix string
	// Retention is the TTL both keys get at every Publish. Optional;
	// default: 24h; at least 1ms.
	Retention time.Duration
	// MaxLen, when > 0, trims each stream to about that many entries at
	// every append (XADD MAXLEN ~); readers behind the trim see a gap.
	// Optional; default: 0 (no trimming, expiry only).
	MaxLen int64
	// PublishTimeout bounds one Publish. Optional; default: 2s.
	PublishTimeout time.Duration
	// ReadTimeout bounds one Read. Optional; default: 2s.
	ReadTimeout time.Duration
	// TracerProvider, when set, traces the commands of the client Open
	// creates (redisotel; command names only, never their arguments).
	// Optional; default: no tracing.
	TracerProvider trace.TracerProvider
}

func (c Config) withDefaults() (Config, error) {
	if c.KeyPrefix == "" {
		c.KeyPrefix = DefaultKeyPrefix
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.PublishTimeout == 0 {
		c.PublishTimeout = DefaultPublishTimeout
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	var errs []error
	if c.Retention < time.Millisecond {
		errs = append(errs, fmt.Errorf("events: retention %s below 1ms", c.Retention))
	}
	if c.MaxLen < 0 {
		errs = append(errs, fmt.Errorf("events: negative max length %d", c.MaxLen))
	}
	if c.PublishTimeout < 0 || c.ReadTimeout < 0 {
		errs = append(errs, errors.New("events: negative timeout"))
	}
	if len(c.KeyPrefix) > 256 || strings.ContainsAny(c.KeyPrefix, "{} \t\r\n") {
		errs = append(errs, fmt.Errorf("events: invalid key prefix %q", c.KeyPrefix))
	}
	return c, errors.Join(errs...)
}

// Redis publishes and reads the public events of runs in Redis Streams. It
// is safe for concurrent use.
//
// The Lua script touches two keys per run, so Redis Cluster is not
// supported (the keys hash to different slots); use a single node or a
// replicated/sentinel setup.
type Redis struct {
	client redis.UniversalClient
	owned  bool
	cfg    Config
}

// New returns a Redis event stream on client, which the caller keeps and
// closes. Give client short dial/read/write timeouts (see Open): Redis must
// never block durable work.
func New(client redis.UniversalClient, cfg Config) (*Redis, error) {
	if client == nil {
		return nil, errors.New("events: nil redis client")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Redis{client: client, cfg: cfg}, nil
}

// Open connects (lazily) to the Redis at addr, a "host:port" or a
// "redis://" / "rediss://" URL, with short timeouts (dial 1s, read/write
// 2s, no dial retry, one command retry, context deadlines honoured). Close
// releases the client.
func Open(addr string, cfg Config) (*Redis, error) {
	var opt *redis.Options
	if strings.Contains(addr, "://") {
		var err error
		if opt, err = redis.ParseURL(addr); err != nil {
			// The parse error would quote the URL, password included.
			return nil, fmt.Errorf("events: invalid redis URL %s", DisplayAddr(addr))
		}
	} else {
		if addr == "" {
			return nil, errors.New("events: empty redis address")
		}
		opt = &redis.Options{Addr: addr}
	}
	opt.DialTimeout = time.Second
	opt.ReadTimeout = 2 * time.Second
	opt.WriteTimeout = 2 * time.Second
	opt.PoolTimeout = time.Second
	opt.MaxRetries = 1
	opt.DialerRetries = 1
	opt.ContextTimeoutEnabled = true
	// No maintenance-notification handshake (a Redis Cloud feature) and
	// its background workers.
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	client := redis.NewClient(opt)
	if cfg.TracerProvider != nil {
		// Without db.statement: an XADD's arguments are the event.
		if err := redisotel.InstrumentTracing(client, redisotel.WithTracerProvider(cfg.TracerProvider),
			redisotel.WithDBStatement(false), redisotel.WithDialFilter(true)); err != nil {
			_ = client.Close()
			return nil, fmt.Errorf("events: redis tracing: %w", err)
		}
	}
	r, err := New(client, cfg)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	r.owned = true
	return r, nil
}

// Close closes the client if Open created it; else it does nothing.
func (r *Redis) Close() error {
	if !r.owned {
		return nil
	}
	return r.client.Close()
}

// Ping checks that Redis answers (for readiness reports), within the read
// timeout. Errors wrap ErrUnavailable.
func (r *Redis) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.ReadTimeout)
	defer cancel()
	if err := r.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("%w: ping: %w", ErrUnavailable, err)
	}
	return nil
}

// StreamKey returns the stream key of runID ("<prefix><run_id>"; the dedupe
// set is StreamKey + ":ids"). It returns ErrInvalidRunID for an unsafe ID.
func (r *Redis) StreamKey(runID string) (string, error) {
	if err := ValidateRunID(runID); err != nil {
		return "", err
	}
	return r.cfg.KeyPrefix + runID, nil
}

// ValidateRunID returns ErrInvalidRunID unless runID is 1 to MaxRunIDLen
// ASCII letters, digits, '-', '_' or '.'. (':' is excluded so that no run's
// stream key is another run's ":ids" key.)
func ValidateRunID(runID string) error {
	if runID == "" || len(runID) > MaxRunIDLen {
		return fmt.Errorf("%w: length %d", ErrInvalidRunID, len(runID))
	}
	for i := range len(runID) {
		if c := runID[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return fmt.Errorf("%w: %q", ErrInvalidRunID, runID)
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// publishScript appends the events whose IDs are not in the dedupe set,
// records their IDs and sets both keys' TTL, atomically.
//
//	KEYS[1] stream, KEYS[2] dedupe set
//	ARGV[1] TTL in ms, ARGV[2] MAXLEN (0: none), ARGV[3] first sequence
//	number without a cursor (2^20), then pairs (event_id, event JSON).
//
// It returns the number of events appended. An entry whose sequence number
// has no cursor is deleted again and the script fails after setting the TTL
// (entries appended before it stay).
var publishScript = redis.NewScript(`
local ttl = tonumber(ARGV[1])
local maxlen = tonumber(ARGV[2])
local seqlimit = tonumber(ARGV[3])
local added = 0
local overflow = false
for i = 4, #ARGV, 2 do
  local id = ARGV[i]
  if redis.call('SISMEMBER', KEYS[2], id) == 0 then
    local sid
    if maxlen > 0 then
      sid = redis.call('XADD', KEYS[1], 'MAXLEN', '~', maxlen, '*', 'event', ARGV[i + 1])
    else
      sid = redis.call('XADD', KEYS[1], '*', 'event', ARGV[i + 1])
    end
    local dash = string.find(sid, '-', 1, true)
    if tonumber(string.sub(sid, dash + 1)) >= seqlimit then
      redis.call('XDEL', KEYS[1], sid)
      overflow = true
      break
    end
    redis.call('SADD', KEYS[2], id)
    added = added + 1
  end
end
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
if overflow then
  return redis.error_reply('ERR ' .. '` + seqOverflowMsg + `')
end
return added
`)

// seqOverflowMsg is publishScript's error for an entry without a cursor.
const seqOverflowMsg = "stream sequence number out of cursor range"

// Publish appends events to runID's stream in one round trip, skipping
// those whose event_id was already published (re-sends are no-ops), and
// refreshes the retention TTL of the stream and its dedupe set. Events are
// stored with an empty cursor (Read assigns it) and RunID set to runID
// (an event's RunID, when set, must be runID).
//
// Publish gives up after PublishTimeout. Its errors (ErrUnavailable when
// Redis is down; ErrCursorRange if Redis made an entry ID without a
// cursor, which needs over a million appends to the stream in one
// millisecond or a stream ID from the future) must be logged and ignored:
// events are provisional.
func (r *Redis) Publish(ctx context.Context, runID string, evs []runtime.RunEvent) error {
	key, err := r.StreamKey(runID)
	if err != nil {
		return err
	}
	if len(evs) == 0 {
		return nil
	}
	if len(evs) > MaxPublishBatch {
		return fmt.Errorf("%w: batch of %d events over %d", ErrInvalidEvent, len(evs), MaxPublishBatch)
	}
	args := make([]any, 0, 3+2*len(evs))
	args = append(args, r.cfg.Retention.Milliseconds(), r.cfg.MaxLen, maxSeq+1)
	for i := range evs {
		ev := evs[i]
		if ev.EventID == "" {
			return fmt.Errorf("%w: event %d (%s) has no event_id", ErrInvalidEvent, i, ev.Type)
		}
		switch ev.RunID {
		case runID:
		case "":
			ev.RunID = runID
		default:
			return fmt.Errorf("%w: event %s is for run %q, not %q", ErrInvalidEvent, ev.EventID, ev.RunID, runID)
		}
		ev.Cursor = ""
		data, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("%w: encode event %s: %w", ErrInvalidEvent, ev.EventID, err)
		}
		args = append(args, ev.EventID, data)
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
	defer cancel()
	if err := publishScript.Run(ctx, r.client, []string{key, key + ":ids"}, args...).Err(); err != nil {
		if strings.Contains(err.Error(), seqOverflowMsg) {
			return fmt.Errorf("%w: publish events of run %s: %w", ErrCursorRange, runID, err)
		}
		return fmt.Errorf("%w: publish %d events of run %s: %w", ErrUnavailable, len(evs), runID, err)
	}
	return nil
}

// Read returns up to limit (1 to MaxReadLimit; out of range: MaxReadLimit)
// events of runID after cursor after, in order, each with its Cursor set,
// and the cursor to continue from (the last event's, or after when there is
// none).
//
// gap reports that events after `after` may be lost: after is not Start and
// the stream is empty (expired) or its first entry is newer than after
// (trimmed). On a gap the events are read from the stream's start and next
// continues from them (Start when the stream is empty): the caller emits a
// "gap" event, then these.
//
// Read gives up after ReadTimeout; errors wrap ErrUnavailable (Redis
// unreachable), ErrCorrupt, ErrInvalidRunID or ErrInvalidCursor.
func (r *Redis) Read(ctx context.Context, runID string, after Cursor, limit int) (evs []runtime.RunEvent, next Cursor, gap bool, err error) {
	key, err := r.StreamKey(runID)
	if err != nil {
		return nil, after, false, err
	}
	if after < 0 {
		return nil, after, false, fmt.Errorf("%w: %d", ErrInvalidCursor, int64(after))
	}
	if limit <= 0 || limit > MaxReadLimit {
		limit = MaxReadLimit
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.ReadTimeout)
	defer cancel()
	var first, page *redis.XMessageSliceCmd
	_, err = r.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		first = p.XRangeN(ctx, key, "-", "+", 1)
		if after < Cursor(maxMs<<SeqBits|maxSeq) {
			// after+1 is the smallest entry ID after `after` (see Cursor).
			page = p.XRangeN(ctx, key, (after + 1).StreamID(), "+", int64(limit))
		}
		return nil
	})
	if err != nil {
		return nil, after, false, fmt.Errorf("%w: read events of run %s: %w", ErrUnavailable, runID, err)
	}
	next = after
	if after != Start {
		firsts := first.Val()
		if len(firsts) == 0 {
			return nil, Start, true, nil
		}
		c, err := ParseStreamID(firsts[0].ID)
		if err != nil {
			return nil, after, false, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		if c > after {
			gap, next = true, Start // every entry is newer than after: page is the stream's start
		}
	}
	if page == nil {
		return nil, next, gap, nil
	}
	msgs := page.Val()
	evs = make([]runtime.RunEvent, 0, len(msgs))
	for _, m := range msgs {
		ev, c, err := decodeEntry(m)
		if err != nil {
			return nil, after, false, err
		}
		evs = append(evs, ev)
		next = c
	}
	return evs, next, gap, nil
}

func decodeEntry(m redis.XMessage) (runtime.RunEvent, Cursor, error) {
	c, err := ParseStreamID(m.ID)
	if err != nil {
		return runtime.RunEvent{}, 0, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	raw, ok := m.Values["event"].(string)
	if !ok {
		return runtime.RunEvent{}, 0, fmt.Errorf("%w: entry %s has no event field", ErrCorrupt, m.ID)
	}
	var ev runtime.RunEvent
	if err := json.Unmarshal([]byte(raw), &ev); err != nil {
		return runtime.RunEvent{}, 0, fmt.Errorf("%w: entry %s: %w", ErrCorrupt, m.ID, err)
	}
	ev.Cursor = c.String()
	ev.CreatedAt = c.Time()
	return ev, c, nil
}

// Watch blocks until runID's stream has an entry after cursor after
// (true), timeout elapses (false; timeout <= 0 means DefaultWatchTimeout,
// and it is capped at MaxWatchTimeout) or ctx ends (its error). It is the
// SSE stream's wake-up: the caller then Reads. Errors wrap ErrUnavailable;
// a caller should back off before watching again.
//
// Cancelling ctx interrupts the wait only through ctx's deadline when the
// client honours context deadlines (Open's does); otherwise the wait ends
// at timeout.
func (r *Redis) Watch(ctx context.Context, runID string, after Cursor, timeout time.Duration) (bool, error) {
	key, err := r.StreamKey(runID)
	if err != nil {
		return false, err
	}
	if after < 0 {
		return false, fmt.Errorf("%w: %d", ErrInvalidCursor, int64(after))
	}
	if timeout <= 0 {
		timeout = DefaultWatchTimeout
	}
	timeout = min(timeout, MaxWatchTimeout)
	if timeout < time.Millisecond {
		timeout = time.Millisecond // BLOCK 0 would block forever
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout+r.cfg.ReadTimeout)
	defer cancel()
	res, err := r.client.XRead(ctx, &redis.XReadArgs{
		Streams: []string{key, after.StreamID()},
		Count:   1,
		Block:   timeout,
	}).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return false, nil
	case err != nil:
		if perr := parent.Err(); perr != nil {
			return false, perr
		}
		if d, ok := parent.Deadline(); ok && !time.Now().Before(d) {
			// The socket deadline (the caller's) fired before ctx's timer.
			return false, context.DeadlineExceeded
		}
		return false, fmt.Errorf("%w: watch events of run %s: %w", ErrUnavailable, runID, err)
	}
	for _, s := range res {
		if len(s.Messages) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// DisplayAddr is addr fit for logs and errors: a URL's password is
// replaced by "xxxxx"; an address that does not parse is not shown.
func DisplayAddr(addr string) string {
	if !strings.Contains(addr, "://") {
		return addr
	}
	u, err := url.Parse(addr)
	// An '@' the parse did not take as the end of user info belongs to a
	// password with an unescaped '?', '/' or '#' (now read as the query,
	// path or fragment): nothing of such a URL is shown.
	if err != nil || (u.User == nil && strings.Contains(addr, "@")) {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// SetLogger routes go-redis's own log lines (dial failures during an
// outage, pool notices) to log at level Warn instead of stderr. It is
// process-wide, as go-redis's logger is.
func SetLogger(log *slog.Logger) { redis.SetLogger(redisLogger{log}) }

type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}
