package artifacts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest/s3test"
)

type testBundle struct {
	srv   *s3test.S3Server
	raw   *minio.Client
	store *Store
}

// setup starts a versitygw for the test and returns a Store on its bucket.
func setup(t *testing.T, cfg Config) *testBundle {
	t.Helper()
	srv := s3test.StartS3(t)
	raw := srv.Client(t)
	cfg.Bucket = srv.Bucket
	store, err := NewStore(newClient(t, srv), cfg)
	require.NoError(t, err)
	return &testBundle{srv: srv, raw: raw, store: store}
}

// newClient builds a client through NewClient, as cmd/hxd does.
func newClient(t *testing.T, srv *s3test.S3Server) *minio.Client {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections) // goleak
	client, err := NewClient(ClientConfig{
		Endpoint: "http://" + srv.Endpoint, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, Region: srv.Region,
		Transport: tr,
	})
	require.NoError(t, err)
	return client
}

func sha(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// TestStore runs the store cases against one versitygw.
func TestStore(t *testing.T) {
	t.Parallel()
	tb := setup(t, Config{})
	ctx := context.Background()

	t.Run("round trip", func(t *testing.T) {
		t.Parallel()
		data := bytes.Repeat([]byte("artifact bytes "), 5000)
		key, err := tb.store.Put(ctx, data)
		require.NoError(t, err)
		require.Equal(t, "harness-x/"+sha(data), key)
		require.Equal(t, key, tb.store.Key(data))
		onDisk, err := os.ReadFile(tb.srv.ObjectPath(key))
		require.NoError(t, err)
		require.Equal(t, data, onDisk, "stored under the key")
		got, err := tb.store.Get(ctx, key)
		require.NoError(t, err)
		require.Equal(t, data, got)
	})

	t.Run("empty", func(t *testing.T) {
		t.Parallel()
		key, err := tb.store.Put(ctx, nil)
		require.NoError(t, err)
		require.Equal(t, "harness-x/e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", key)
		got, err := tb.store.Get(ctx, key)
		require.NoError(t, err)
		require.Empty(t, got)
	})

	t.Run("idempotent put", func(t *testing.T) {
		t.Parallel()
		data := []byte("same bytes twice")
		key1, err := tb.store.Put(ctx, data)
		require.NoError(t, err)
		before, err := os.Stat(tb.srv.ObjectPath(key1))
		require.NoError(t, err)
		key2, err := tb.store.Put(ctx, data)
		require.NoError(t, err)
		require.Equal(t, key1, key2)
		after, err := os.Stat(tb.srv.ObjectPath(key2))
		require.NoError(t, err)
		require.True(t, os.SameFile(before, after), "not rewritten (a rewrite links a new file)")
		require.Equal(t, before.ModTime(), after.ModTime(), "not rewritten")
		// Control: a real rewrite is visible in the folder.
		_, err = tb.raw.PutObject(ctx, tb.srv.Bucket, key1, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
		require.NoError(t, err)
		rewritten, err := os.Stat(tb.srv.ObjectPath(key1))
		require.NoError(t, err)
		require.False(t, os.SameFile(after, rewritten) && after.ModTime().Equal(rewritten.ModTime()), "control rewrite not detected")
		got, err := tb.store.Get(ctx, key2)
		require.NoError(t, err)
		require.Equal(t, data, got)
	})

	t.Run("key validation", func(t *testing.T) {
		t.Parallel()
		good := tb.store.Key([]byte("x"))
		hexPart := strings.TrimPrefix(good, "harness-x/")
		for _, tt := range []struct{ name, key string }{
			{"empty", ""},
			{"digest only", hexPart},
			{"wrong prefix", "other/" + hexPart},
			{"prefix without slash", "harness-x" + hexPart},
			{"uppercase", "harness-x/" + strings.ToUpper(hexPart)},
			{"short", good[:len(good)-1]},
			{"long", good + "0"},
			{"non-hex", "harness-x/" + strings.Repeat("g", 64)},
			{"path traversal", "harness-x/../" + hexPart[:61]},
			{"traversal in prefix", "harness-x/../harness-x/" + hexPart},
			{"slash inside", "harness-x/" + hexPart[:32] + "/" + hexPart[33:]},
			{"trailing newline", good + "\n"},
			{"leading slash", "/" + good},
			{"query", good[:len(good)-2] + "?a"},
			{"NUL", good[:len(good)-1] + "\x00"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				_, err := tb.store.Get(ctx, tt.key)
				require.ErrorIs(t, err, ErrInvalidKey)
				require.ErrorIs(t, tb.store.ValidateKey(tt.key), ErrInvalidKey)
			})
		}
		require.NoError(t, tb.store.ValidateKey(good))
	})

	t.Run("not found", func(t *testing.T) {
		t.Parallel()
		_, err := tb.store.Get(ctx, tb.store.Key([]byte("never stored")))
		require.ErrorIs(t, err, ErrNotFound)
	})

	t.Run("corrupted in the folder", func(t *testing.T) {
		t.Parallel()
		data := []byte("the original content")
		key, err := tb.store.Put(ctx, data)
		require.NoError(t, err)
		evil := []byte("THE ORIGINAL CONTENT") // same size
		require.NoError(t, os.WriteFile(tb.srv.ObjectPath(key), evil, 0o644))
		_, err = tb.store.Get(ctx, key)
		require.ErrorIs(t, err, ErrCorrupt)
	})

	t.Run("corrupted through s3", func(t *testing.T) {
		t.Parallel()
		data := []byte("content to be replaced")
		key, err := tb.store.Put(ctx, data)
		require.NoError(t, err)
		evil := []byte("other bytes")
		_, err = tb.raw.PutObject(ctx, tb.srv.Bucket, key, bytes.NewReader(evil), int64(len(evil)), minio.PutObjectOptions{})
		require.NoError(t, err)
		_, err = tb.store.Get(ctx, key)
		require.ErrorIs(t, err, ErrCorrupt)

		// A Put of the real bytes replaces an object of another size.
		key2, err := tb.store.Put(ctx, data)
		require.NoError(t, err)
		require.Equal(t, key, key2)
		got, err := tb.store.Get(ctx, key)
		require.NoError(t, err)
		require.Equal(t, data, got)
	})

	t.Run("size bound", func(t *testing.T) {
		t.Parallel()
		small, err := NewStore(newClient(t, tb.srv), Config{Bucket: tb.srv.Bucket, MaxSize: 16})
		require.NoError(t, err)
		big := bytes.Repeat([]byte("b"), 17)
		_, err = small.Put(ctx, big)
		require.ErrorIs(t, err, ErrTooLarge)
		key, err := tb.store.Put(ctx, big)
		require.NoError(t, err)
		_, err = small.Get(ctx, key)
		require.ErrorIs(t, err, ErrTooLarge)
		ok, err := small.Put(ctx, big[:16])
		require.NoError(t, err)
		_, err = small.Get(ctx, ok)
		require.NoError(t, err)
	})

	t.Run("custom prefix", func(t *testing.T) {
		t.Parallel()
		other, err := NewStore(newClient(t, tb.srv), Config{Bucket: tb.srv.Bucket, Prefix: "tenant-1/art/"})
		require.NoError(t, err)
		data := []byte("prefixed")
		key, err := other.Put(ctx, data)
		require.NoError(t, err)
		require.Equal(t, "tenant-1/art/"+sha(data), key)
		_, err = other.Get(ctx, key)
		require.NoError(t, err)
		_, err = tb.store.Get(ctx, key)
		require.ErrorIs(t, err, ErrInvalidKey, "another store's prefix")
	})

	t.Run("missing bucket", func(t *testing.T) {
		t.Parallel()
		nb, err := NewStore(newClient(t, tb.srv), Config{Bucket: "no-such-bucket"})
		require.NoError(t, err)
		_, err = nb.Put(ctx, []byte("x"))
		require.Error(t, err)
		_, err = nb.Get(ctx, nb.Key([]byte("x")))
		require.Error(t, err)
		require.NotErrorIs(t, err, ErrNotFound, "a missing bucket is a configuration error")
	})
}

func TestConfig(t *testing.T) {
	t.Parallel()
	client, err := NewClient(ClientConfig{Endpoint: "127.0.0.1:1", AccessKey: "a", SecretKey: "b"})
	require.NoError(t, err)
	for _, tt := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{name: "defaults", cfg: Config{Bucket: "b"}, ok: true},
		{name: "nested prefix", cfg: Config{Bucket: "b", Prefix: "a/b-c_d.e/"}, ok: true},
		{name: "prefix without slash", cfg: Config{Bucket: "b", Prefix: "art-"}, ok: true},
		{name: "no bucket", cfg: Config{}},
		{name: "negative size", cfg: Config{Bucket: "b", MaxSize: -1}},
		{name: "leading slash", cfg: Config{Bucket: "b", Prefix: "/x/"}},
		{name: "dot dot", cfg: Config{Bucket: "b", Prefix: "x/../"}},
		{name: "dot", cfg: Config{Bucket: "b", Prefix: "./x/"}},
		{name: "double slash", cfg: Config{Bucket: "b", Prefix: "x//"}},
		{name: "space", cfg: Config{Bucket: "b", Prefix: "a b/"}},
		{name: "too long", cfg: Config{Bucket: "b", Prefix: strings.Repeat("a", MaxPrefixLen+1)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewStore(client, tt.cfg)
			if tt.ok {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
			}
		})
	}
	for _, tt := range []struct {
		name string
		cfg  ClientConfig
	}{
		{"no endpoint", ClientConfig{AccessKey: "a", SecretKey: "b"}},
		{"no keys", ClientConfig{Endpoint: "127.0.0.1:9000"}},
		{"path", ClientConfig{Endpoint: "http://127.0.0.1:9000/bucket", AccessKey: "a", SecretKey: "b"}},
		{"scheme", ClientConfig{Endpoint: "ftp://127.0.0.1:9000", AccessKey: "a", SecretKey: "b"}},
	} {
		_, err := NewClient(tt.cfg)
		require.Error(t, err, tt.name)
	}
}

// TestParseEndpoint: the endpoint forms NewClient takes, and refusals that
// never show the endpoint (it may hold a password).
func TestParseEndpoint(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		ep     string
		host   string
		secure bool
	}{
		{"127.0.0.1:9000", "127.0.0.1:9000", true},
		{"http://127.0.0.1:9000", "127.0.0.1:9000", false},
		{"https://s3.example:443/", "s3.example:443", true},
	} {
		host, secure, err := ParseEndpoint(tt.ep)
		require.NoError(t, err, tt.ep)
		require.Equal(t, tt.host, host, tt.ep)
		require.Equal(t, tt.secure, secure, tt.ep)
	}
	for _, ep := range []string{"", "u:S3cretPW@127.0.0.1:1", "http://u:S3cretPW@127.0.0.1:1", "http://u:S3cretPW@[::1",
		"ftp://u:S3cretPW@127.0.0.1:1", "http://127.0.0.1:1/S3cretPW", "http://127.0.0.1:1?k=S3cretPW"} {
		_, _, err := ParseEndpoint(ep)
		require.ErrorIs(t, err, ErrEndpoint, ep)
		require.NotContains(t, err.Error(), "S3cretPW", ep)
	}
}
