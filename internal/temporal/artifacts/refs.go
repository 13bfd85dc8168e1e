package artifacts

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/minio/minio-go/v7"
)

// Session references (issue 23 retention). PutSession records, besides
// the owner index object, which session references an artifact:
//
//	<prefix>refs/<digest>/<sha256(owner)>/<sha256(session key)>  (empty)
//	<prefix>sessions/<sha256(session key)>/<digest>              (empty)
//
// so that ReleaseSession, when retention deletes a session, can drop its
// references and delete an owner index object no session of that owner
// references any more and an artifact no session references at all.
//
// A release and a concurrent PutSession of the same digest are kept apart
// by a marker object <prefix>deleting/<digest>/<random id> that each
// release holds while it lists and deletes (several sweepers may release
// at once, each removes only its own): PutSession writes its references first,
// then waits while a fresh marker stands, then stores the bytes and the
// owner object. So either the release lists the new reference (and keeps
// everything), or the put's writes come after the release's deletes (and
// restore them). A marker older than MarkerStale (a release that died) is
// ignored; a release that would outlast it deletes nothing and fails.
const (
	refsDir     = "refs/"
	sessionsDir = "sessions/"
	deletingDir = "deleting/"
	// refMeta is the user metadata an owner index object written by
	// PutSession carries: only such an object is ever deleted. Owner
	// objects written by PutOwned (no session known) are kept for good.
	refMeta = "Hxd-Session-Refs"
)

// MarkerStale is how long a release marker is honoured.
const MarkerStale = 2 * time.Minute

// markerPoll is how often PutSession looks at a standing marker again.
const markerPoll = 100 * time.Millisecond

// ErrReleaseSlow: a release of one artifact took too long to delete
// safely; nothing of that artifact was deleted, the release may be tried
// again.
var ErrReleaseSlow = errors.New("artifacts: release too slow to delete safely")

func hashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// RefKey is the key of the object saying that the session stored under
// sessionKey (of owner) references digest.
func (s *Store) RefKey(digest, owner, sessionKey string) string {
	return s.prefix + refsDir + digest + "/" + hashHex(owner) + "/" + hashHex(sessionKey)
}

// sessionRefKey is the key of the session's index entry for digest.
func (s *Store) sessionRefKey(sessionKey, digest string) string {
	return s.sessionRefPrefix(sessionKey) + digest
}

func (s *Store) sessionRefPrefix(sessionKey string) string {
	return s.prefix + sessionsDir + hashHex(sessionKey) + "/"
}

// markerPrefix holds the release markers of digest, one per release
// under way (several sweepers may release the same digest at once).
func (s *Store) markerPrefix(digest string) string { return s.prefix + deletingDir + digest + "/" }

// newMarkerKey is the key of a new release marker of digest.
func (s *Store) newMarkerKey(digest string) (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("artifacts: marker id: %w", err)
	}
	return s.markerPrefix(digest) + hex.EncodeToString(b[:]), nil
}

func (s *Store) putEmpty(ctx context.Context, key string, meta map[string]string) error {
	_, err := s.client.PutObject(ctx, s.bucket, key, bytes.NewReader(nil), 0, minio.PutObjectOptions{
		ContentType: "application/octet-stream", UserMetadata: meta,
	})
	if err != nil {
		return fmt.Errorf("artifacts: put %s: %w", key, err)
	}
	return nil
}

// PutSession stores data for the session stored under sessionKey, owned
// by owner: its references first, then (once no release of the digest
// is under way) the bytes and the owner index object. It returns the hex
// digest once all are durable. Idempotent.
func (s *Store) PutSession(ctx context.Context, owner, sessionKey string, data []byte) (string, error) {
	if int64(len(data)) > s.maxSize {
		return "", fmt.Errorf("%w: %d bytes over %d", ErrTooLarge, len(data), s.maxSize)
	}
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	for _, key := range []string{s.RefKey(digest, owner, sessionKey), s.sessionRefKey(sessionKey, digest)} {
		if err := s.putEmpty(ctx, key, nil); err != nil {
			return "", err
		}
	}
	if err := s.awaitNoMarker(ctx, digest); err != nil {
		return "", err
	}
	if _, err := s.Put(ctx, data); err != nil {
		return "", err
	}
	okey := s.OwnerKey(digest, owner)
	info, err := s.client.StatObject(ctx, s.bucket, okey, minio.StatObjectOptions{})
	switch {
	case err == nil && info.UserMetadata[refMeta] == "":
		return digest, nil // written by PutOwned: kept as it is
	case err != nil && !isNotFound(err):
		return "", fmt.Errorf("artifacts: stat %s: %w", okey, err)
	}
	if err := s.putEmpty(ctx, okey, map[string]string{refMeta: "1"}); err != nil {
		return "", err
	}
	return digest, nil
}

// awaitNoMarker waits while a fresh release marker of digest stands.
func (s *Store) awaitNoMarker(ctx context.Context, digest string) error {
	for {
		fresh, err := s.freshMarker(ctx, digest)
		if err != nil || !fresh {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(markerPoll):
		}
	}
}

// freshMarker reports whether a release marker of digest younger than
// MarkerStale stands.
func (s *Store) freshMarker(ctx context.Context, digest string) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the listing
	prefix := s.markerPrefix(digest)
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			return false, fmt.Errorf("artifacts: list %s: %w", prefix, obj.Err)
		}
		if time.Since(obj.LastModified) <= MarkerStale {
			return true, nil
		}
	}
	return false, nil
}

// Released counts what ReleaseSession deleted.
type Released struct {
	// Artifacts and Bytes: artifacts no session referenced any more.
	Artifacts int
	Bytes     int64
}

// ReleaseSession drops the references of the session stored under
// sessionKey (of owner), and deletes the owner index objects no other
// session of owner references and the artifacts no session references
// (nor any owner object PutOwned wrote). Idempotent: a release that
// failed is resumed by calling it again.
func (s *Store) ReleaseSession(ctx context.Context, owner, sessionKey string) (Released, error) {
	var out Released
	prefix := s.sessionRefPrefix(sessionKey)
	for {
		digests, err := s.listDigests(ctx, prefix, 100)
		if err != nil {
			return out, err
		}
		if len(digests) == 0 {
			return out, nil
		}
		for _, d := range digests {
			n, err := s.releaseDigest(ctx, d, owner, sessionKey)
			if err != nil {
				return out, err
			}
			if n >= 0 {
				out.Artifacts++
				out.Bytes += n
			}
		}
	}
}

// listDigests lists up to limit digests named under prefix.
func (s *Store) listDigests(ctx context.Context, prefix string, limit int) ([]string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the listing
	var digests []string
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, MaxKeys: limit}) {
		if obj.Err != nil {
			return nil, fmt.Errorf("artifacts: list %s: %w", prefix, obj.Err)
		}
		if d := obj.Key[len(prefix):]; ValidDigest(d) {
			digests = append(digests, d)
		}
		if len(digests) == limit {
			break
		}
	}
	return digests, nil
}

// releaseDigest drops one reference under the marker; it returns the
// size of the artifact it deleted, -1 when it kept it.
func (s *Store) releaseDigest(ctx context.Context, digest, owner, sessionKey string) (int64, error) {
	start := time.Now()
	marker, err := s.newMarkerKey(digest)
	if err != nil {
		return -1, err
	}
	if err := s.putEmpty(ctx, marker, nil); err != nil {
		return -1, err
	}
	// A marker left behind by a failed removal goes stale after MarkerStale.
	defer func() { _ = s.remove(context.WithoutCancel(ctx), marker) }()
	if err := s.remove(ctx, s.RefKey(digest, owner, sessionKey)); err != nil {
		return -1, err
	}
	ownerRefs, err := s.any(ctx, s.prefix+refsDir+digest+"/"+hashHex(owner)+"/")
	if err != nil {
		return -1, err
	}
	var deleteOwner bool
	okey := s.OwnerKey(digest, owner)
	if !ownerRefs {
		info, err := s.client.StatObject(ctx, s.bucket, okey, minio.StatObjectOptions{})
		switch {
		case err == nil:
			deleteOwner = info.UserMetadata[refMeta] != ""
		case !isNotFound(err):
			return -1, fmt.Errorf("artifacts: stat %s: %w", okey, err)
		}
	}
	anyRefs, err := s.any(ctx, s.prefix+refsDir+digest+"/")
	if err != nil {
		return -1, err
	}
	if time.Since(start) > MarkerStale/2 {
		return -1, fmt.Errorf("%w: %s", ErrReleaseSlow, digest)
	}
	if deleteOwner {
		if err := s.remove(ctx, okey); err != nil {
			return -1, err
		}
	}
	size := int64(-1)
	if !anyRefs {
		owners, err := s.any(ctx, s.prefix+ownersDir+digest+"/")
		if err != nil {
			return -1, err
		}
		if !owners {
			key := s.prefix + digest
			info, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
			switch {
			case err == nil:
				if time.Since(start) > MarkerStale/2 {
					return -1, fmt.Errorf("%w: %s", ErrReleaseSlow, digest)
				}
				if err := s.remove(ctx, key); err != nil {
					return -1, err
				}
				size = info.Size
			case !isNotFound(err):
				return -1, fmt.Errorf("artifacts: stat %s: %w", key, err)
			}
		}
	}
	// Last: the session's index entry, so that a failed release is found again.
	return size, s.remove(ctx, s.sessionRefKey(sessionKey, digest))
}

func (s *Store) remove(ctx context.Context, key string) error {
	if err := s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil && !isNotFound(err) {
		return fmt.Errorf("artifacts: delete %s: %w", key, err)
	}
	return nil
}

// any reports whether an object exists under prefix.
func (s *Store) any(ctx context.Context, prefix string) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	obj, ok := <-s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true, MaxKeys: 1})
	switch {
	case !ok:
		return false, nil
	case obj.Err != nil:
		return false, fmt.Errorf("artifacts: list %s: %w", prefix, obj.Err)
	}
	return true, nil
}
