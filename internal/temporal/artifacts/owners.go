package artifacts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/minio/minio-go/v7"
)

// ownersDir is the folder of the owner index under the store's prefix.
const ownersDir = "owners/"

// ValidDigest reports whether s is an artifact digest: exactly 64
// lowercase hex characters.
func ValidDigest(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := range len(s) {
		if !isLowerHex(s[i]) {
			return false
		}
	}
	return true
}

func isLowerHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

// OwnerKey returns the key of the owner index object saying that owner may
// read the artifact of digest: prefix + "owners/" + digest + "/" + the hex
// SHA-256 of owner (the principal itself never appears in a key).
func (s *Store) OwnerKey(digest, owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return s.prefix + ownersDir + digest + "/" + hex.EncodeToString(sum[:])
}

// PutOwned stores data (Put), then records that owner may read it (an
// empty object at OwnerKey), and returns the hex digest. Both writes are
// idempotent; the digest is returned only once both are durable.
func (s *Store) PutOwned(ctx context.Context, owner string, data []byte) (string, error) {
	key, err := s.Put(ctx, data)
	if err != nil {
		return "", err
	}
	digest, err := s.digest(key)
	if err != nil {
		return "", err
	}
	okey := s.OwnerKey(digest, owner)
	_, err = s.client.PutObject(ctx, s.bucket, okey, bytes.NewReader(nil), 0, minio.PutObjectOptions{
		ContentType: "application/octet-stream",
	})
	if err != nil {
		return "", fmt.Errorf("artifacts: put %s: %w", okey, err)
	}
	return digest, nil
}

// Owned reports whether owner's index object for digest exists. It returns
// ErrInvalidKey for a digest that is not 64 lowercase hex characters.
func (s *Store) Owned(ctx context.Context, owner, digest string) (bool, error) {
	if !ValidDigest(digest) {
		return false, fmt.Errorf("%w: %q", ErrInvalidKey, truncate(digest))
	}
	okey := s.OwnerKey(digest, owner)
	_, err := s.client.StatObject(ctx, s.bucket, okey, minio.StatObjectOptions{})
	switch {
	case err == nil:
		return true, nil
	case isNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("artifacts: stat %s: %w", okey, err)
}

// GetOwned returns the bytes of the artifact digest (hash verified, as
// Get) when owner may read it. Errors: ErrInvalidKey (bad digest, nothing
// read), ErrNotFound (no owner index object for owner, or no artifact),
// else Get's errors or the S3 client's.
func (s *Store) GetOwned(ctx context.Context, owner, digest string) ([]byte, error) {
	owned, err := s.Owned(ctx, owner, digest)
	if err != nil {
		return nil, err
	}
	if !owned {
		return nil, fmt.Errorf("%w: %s for this owner", ErrNotFound, digest)
	}
	return s.Get(ctx, s.prefix+digest)
}
