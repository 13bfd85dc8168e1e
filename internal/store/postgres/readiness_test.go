package postgres_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/runtime/rtstore"
)

// TestPingNeedsWrites: a server that answers and has the schema but takes
// no writes (here every session is read-only, as on a standby) is not
// ready: Ping reports ErrUnavailable, and so does a write.
func TestPingNeedsWrites(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.store.Ping(b.ctx()))

	cfg := b.cfg
	cfg.AutoMigrate = false
	u, err := url.Parse(cfg.URL)
	require.NoError(t, err)
	q := u.Query()
	q.Set("options", "-c default_transaction_read_only=on")
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // pgx reads no '+' as a space
	cfg.URL = u.String()
	ro := openStore(t, cfg)

	err = ro.Ping(b.ctx())
	require.ErrorIs(t, err, rtstore.ErrUnavailable)
	require.NotErrorIs(t, err, rtstore.ErrSchema)
	require.ErrorIs(t, ro.SessionInsert(b.ctx(), &rtstore.SessionRow{ID: "ses-ro", Principal: "alice"}), rtstore.ErrUnavailable)
	_, err = ro.SessionGet(b.ctx(), "ses-ro")
	require.ErrorIs(t, err, rtstore.ErrNotFound, "reads go on")
	require.NoError(t, b.store.Ping(b.ctx()), "the writable store is ready")
}
