package artifacts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Defaults of Config.
const (
	DefaultPrefix  = "harness-x/"
	DefaultMaxSize = 64 << 20
	// MaxPrefixLen bounds Config.Prefix.
	MaxPrefixLen = 256
)

var (
	// ErrInvalidKey is returned by Get for a key that is not exactly the
	// store's prefix followed by 64 lowercase hex digits.
	ErrInvalidKey = errors.New("artifacts: invalid key")
	// ErrNotFound is returned by Get for a key with no object.
	ErrNotFound = errors.New("artifacts: not found")
	// ErrCorrupt is returned by Get when the object's SHA-256 is not the
	// one its key names.
	ErrCorrupt = errors.New("artifacts: checksum mismatch")
	// ErrTooLarge is returned for an artifact over Config.MaxSize.
	ErrTooLarge = errors.New("artifacts: too large")
)

// Config configures a Store.
type Config struct {
	// Bucket is the existing bucket holding the artifacts. Required.
	Bucket string
	// Prefix precedes the hex digest in object keys: ASCII letters,
	// digits, '-', '_', '.' and '/', not starting with '/', no empty, "."
	// or ".." segment. Optional; default: "harness-x/".
	Prefix string
	// MaxSize bounds an artifact's size, on Put and on Get. Optional;
	// default: 64 MiB.
	MaxSize int64
}

func (c Config) withDefaults() (Config, error) {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.MaxSize == 0 {
		c.MaxSize = DefaultMaxSize
	}
	var errs []error
	if c.Bucket == "" {
		errs = append(errs, errors.New("artifacts: bucket required"))
	}
	if c.MaxSize < 0 {
		errs = append(errs, fmt.Errorf("artifacts: negative max size %d", c.MaxSize))
	}
	if err := validatePrefix(c.Prefix); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func validatePrefix(p string) error {
	if len(p) > MaxPrefixLen || p[0] == '/' {
		return fmt.Errorf("artifacts: invalid prefix %q", p)
	}
	for i := range len(p) {
		if c := p[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' && c != '/' {
			return fmt.Errorf("artifacts: invalid prefix %q", p)
		}
	}
	segs := strings.Split(p, "/")
	for i, seg := range segs {
		last := i == len(segs)-1
		if (seg == "" && !last) || seg == "." || seg == ".." {
			return fmt.Errorf("artifacts: invalid prefix %q", p)
		}
	}
	return nil
}

// Store keeps content-addressed artifacts in an S3 bucket. It is safe for
// concurrent use.
type Store struct {
	client  *minio.Client
	bucket  string
	prefix  string
	maxSize int64
}

// NewStore returns a Store on client (see NewClient).
func NewStore(client *minio.Client, cfg Config) (*Store, error) {
	if client == nil {
		return nil, errors.New("artifacts: nil s3 client")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Store{client: client, bucket: cfg.Bucket, prefix: cfg.Prefix, maxSize: cfg.MaxSize}, nil
}

// ClientConfig configures NewClient.
type ClientConfig struct {
	// Endpoint is "host:port" (HTTPS) or an "http://" or "https://" URL
	// without a path. Required.
	Endpoint string
	// AccessKey and SecretKey are static credentials (SessionToken
	// optional). Required.
	AccessKey, SecretKey, SessionToken string
	// Region is the bucket's region. Optional; default: discovered.
	Region string
	// Transport is the HTTP transport. Optional; default: a clone of
	// http.DefaultTransport.
	Transport http.RoundTripper
}

// ErrEndpoint: an S3 endpoint that is not host:port or http(s)://host[:port].
var ErrEndpoint = errors.New("s3 endpoint must be host:port or http(s)://host[:port]")

// ParseEndpoint reads an S3 endpoint: "host:port" (HTTPS) or an "http://"
// or "https://" URL without credentials, path or query. Its errors never
// hold the endpoint, which may carry a password written into it
// (credentials come from ClientConfig).
func ParseEndpoint(ep string) (host string, secure bool, err error) {
	if !strings.Contains(ep, "://") {
		if ep == "" {
			return "", false, fmt.Errorf("%w: none given", ErrEndpoint)
		}
		if strings.ContainsAny(ep, "@/?#") {
			return "", false, fmt.Errorf("%w, without user:password@, path or query", ErrEndpoint)
		}
		return ep, true, nil
	}
	u, err := url.Parse(ep)
	switch {
	case err != nil:
		return "", false, fmt.Errorf("%w: it does not parse", ErrEndpoint)
	case u.User != nil:
		return "", false, fmt.Errorf("%w, without user:password@", ErrEndpoint)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", false, fmt.Errorf("%w, not a %s URL", ErrEndpoint, strconv.Quote(u.Scheme))
	case u.Host == "" || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "":
		return "", false, fmt.Errorf("%w: a URL with a host and no path or query", ErrEndpoint)
	}
	return u.Host, u.Scheme == "https", nil
}

// NewClient returns a minio client for an S3-compatible endpoint, using
// path-style bucket addressing (what self-hosted servers expect).
func NewClient(cfg ClientConfig) (*minio.Client, error) {
	host, secure, err := ParseEndpoint(cfg.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("artifacts: %w", err)
	}
	if cfg.AccessKey == "" || cfg.SecretKey == "" {
		return nil, errors.New("artifacts: s3 access and secret key required")
	}
	tr := cfg.Transport
	if tr == nil {
		tr = http.DefaultTransport.(*http.Transport).Clone()
	}
	client, err := minio.New(host, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken),
		Secure:       secure,
		Region:       cfg.Region,
		Transport:    tr,
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		return nil, fmt.Errorf("artifacts: s3 client: %w", err)
	}
	return client, nil
}

// Prefix returns the object key prefix.
func (s *Store) Prefix() string { return s.prefix }

// Key returns the object key of data: prefix + lowercase hex SHA-256.
func (s *Store) Key(data []byte) string {
	sum := sha256.Sum256(data)
	return s.prefix + hex.EncodeToString(sum[:])
}

// ValidateKey returns ErrInvalidKey unless key is exactly the prefix
// followed by 64 lowercase hex digits.
func (s *Store) ValidateKey(key string) error {
	_, err := s.digest(key)
	return err
}

// digest returns the hex digest key names.
func (s *Store) digest(key string) (string, error) {
	hexPart, ok := strings.CutPrefix(key, s.prefix)
	if !ok || !ValidDigest(hexPart) {
		return "", fmt.Errorf("%w: %q", ErrInvalidKey, truncate(key))
	}
	return hexPart, nil
}

// Put stores data under Key(data) and returns the key. It is idempotent:
// an object already there with the same size is kept (its content is
// verified on Get), any other is overwritten. It returns ErrTooLarge for
// data over MaxSize.
func (s *Store) Put(ctx context.Context, data []byte) (string, error) {
	if int64(len(data)) > s.maxSize {
		return "", fmt.Errorf("%w: %d bytes over %d", ErrTooLarge, len(data), s.maxSize)
	}
	key := s.Key(data)
	info, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
	switch {
	case err == nil && info.Size == int64(len(data)):
		return key, nil
	case err != nil && !isNotFound(err):
		return "", fmt.Errorf("artifacts: stat %s: %w", key, err)
	}
	_, err = s.client.PutObject(ctx, s.bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{
		ContentType:    "application/octet-stream",
		SendContentMd5: true,
	})
	if err != nil {
		return "", fmt.Errorf("artifacts: put %s: %w", key, err)
	}
	return key, nil
}

// Get returns the bytes stored under key after checking their SHA-256
// against the key. Errors: ErrInvalidKey (bad key shape, nothing read),
// ErrNotFound, ErrTooLarge (object over MaxSize), ErrCorrupt (checksum
// mismatch), or the S3 client's error.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	want, err := s.digest(key)
	if err != nil {
		return nil, err
	}
	obj, err := s.client.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, s.getError(key, err)
	}
	defer func() { _ = obj.Close() }() // a read: its close has nothing to report
	data, err := io.ReadAll(io.LimitReader(obj, s.maxSize+1))
	if err != nil {
		return nil, s.getError(key, err)
	}
	if int64(len(data)) > s.maxSize {
		return nil, fmt.Errorf("%w: %s over %d bytes", ErrTooLarge, key, s.maxSize)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != want {
		return nil, fmt.Errorf("%w: %s has sha256 %s", ErrCorrupt, key, got)
	}
	return data, nil
}

func (s *Store) getError(key string, err error) error {
	if isNotFound(err) {
		return fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return fmt.Errorf("artifacts: get %s: %w", key, err)
}

func isNotFound(err error) bool {
	resp := minio.ToErrorResponse(err)
	return resp.Code == minio.NoSuchKey || (resp.StatusCode == http.StatusNotFound && resp.Code != minio.NoSuchBucket)
}

func truncate(s string) string {
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}
