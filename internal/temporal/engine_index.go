package temporal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/minio/minio-go/v7"

	"hxd/internal/runtime"
	"hxd/internal/temporal/artifacts"
	"hxd/internal/temporal/events"
)

// S3RunIndex keeps the run → session index as one small object per run,
// "<prefix>runs/<run_id>" holding the session ID. S3 is durable and
// already part of a Temporal deployment (artifacts), the object is
// written once before the run exists and never changes, and a read costs
// one GET (the engine caches it).
type S3RunIndex struct {
	client *minio.Client
	bucket string
	prefix string
}

// NewS3RunIndex returns the index in bucket under prefix (default
// "harness-x/"), on a client from artifacts.NewClient.
func NewS3RunIndex(client *minio.Client, bucket, prefix string) (*S3RunIndex, error) {
	if client == nil || bucket == "" {
		return nil, errors.New("run index: s3 client and bucket are required")
	}
	if prefix == "" {
		prefix = artifacts.DefaultPrefix
	}
	return &S3RunIndex{client: client, bucket: bucket, prefix: prefix}, nil
}

func (x *S3RunIndex) key(runID string) (string, bool) {
	if events.ValidateRunID(runID) != nil || strings.HasPrefix(runID, ".") {
		return "", false
	}
	return x.prefix + "runs/" + runID, true
}

// Record stores runID → the session's key.
func (x *S3RunIndex) Record(ctx context.Context, runID, sessionKey string) error {
	key, ok := x.key(runID)
	if !ok {
		return fmt.Errorf("run index: invalid run id %q", runID)
	}
	_, err := x.client.PutObject(ctx, x.bucket, key, strings.NewReader(sessionKey), int64(len(sessionKey)),
		minio.PutObjectOptions{ContentType: "text/plain; charset=utf-8", DisableMultipart: true})
	if err != nil {
		return fmt.Errorf("run index: put %s: %w", key, err)
	}
	return nil
}

// Lookup returns the key of runID's session; runtime.ErrNotFound when unknown.
func (x *S3RunIndex) Lookup(ctx context.Context, runID string) (string, error) {
	key, ok := x.key(runID)
	if !ok {
		return "", runtime.ErrNotFound
	}
	raw, err := getSmall(ctx, x.client, x.bucket, key, 1024)
	switch {
	case errors.Is(err, runtime.ErrNotFound):
		return "", runtime.ErrNotFound
	case err != nil:
		return "", fmt.Errorf("run index: %w", err)
	case len(raw) == 0:
		return "", runtime.ErrNotFound
	}
	return string(raw), nil
}

// getSmall reads up to limit bytes of the object key: runtime.ErrNotFound
// when there is none, runtime.ErrUnavailable when the read fails.
func getSmall(ctx context.Context, c *minio.Client, bucket, key string, limit int64) ([]byte, error) {
	obj, err := c.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	defer func() { _ = obj.Close() }() // a read: its close has nothing to report
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, io.LimitReader(obj, limit)); err != nil {
		if minio.ToErrorResponse(err).Code == minio.NoSuchKey {
			return nil, fmt.Errorf("get %s: %w", key, runtime.ErrNotFound)
		}
		return nil, fmt.Errorf("get %s: %w: %w", key, runtime.ErrUnavailable, err)
	}
	return buf.Bytes(), nil
}

// MemoryRunIndex is a RunIndex in memory (tests, single-process demos).
type MemoryRunIndex struct {
	mu sync.Mutex
	m  map[string]string
}

// Record stores runID → the session's key.
func (x *MemoryRunIndex) Record(_ context.Context, runID, sessionKey string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.m == nil {
		x.m = map[string]string{}
	}
	x.m[runID] = sessionKey
	return nil
}

// Lookup returns the key of runID's session; runtime.ErrNotFound when unknown.
func (x *MemoryRunIndex) Lookup(_ context.Context, runID string) (string, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if sid, ok := x.m[runID]; ok {
		return sid, nil
	}
	return "", runtime.ErrNotFound
}

// Delete removes runID's entry (retention); a missing entry is no error.
func (x *S3RunIndex) Delete(ctx context.Context, runID string) error {
	key, ok := x.key(runID)
	if !ok {
		return nil
	}
	if err := x.client.RemoveObject(ctx, x.bucket, key, minio.RemoveObjectOptions{}); err != nil && minio.ToErrorResponse(err).Code != "NoSuchKey" {
		return fmt.Errorf("run index: delete %s: %w", key, err)
	}
	return nil
}

// Delete removes runID's entry.
func (x *MemoryRunIndex) Delete(_ context.Context, runID string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.m, runID)
	return nil
}
