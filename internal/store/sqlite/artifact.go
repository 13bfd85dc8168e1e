package sqlite

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Artifact SQL. Artifacts are immutable: a known id is left alone.
const (
	sqlArtifactPut = `INSERT INTO artifacts (id, content) VALUES (?, ?)
ON CONFLICT (id) DO NOTHING`
	sqlArtifactGet = `SELECT content FROM artifacts WHERE id = ?`
)

// ArtifactPut stores data under its lowercase hex SHA-256; a no-op if the
// artifact is present. Returns an error if sha256 is not the digest of
// data.
func (s *Store) ArtifactPut(ctx context.Context, sha256Hex string, data []byte) error {
	sum := sha256.Sum256(data)
	if want := hex.EncodeToString(sum[:]); sha256Hex != want {
		return fmt.Errorf("put artifact %s: content has sha256 %s", sha256Hex, want)
	}
	if data == nil {
		data = []byte{} // content is NOT NULL
	}
	if _, err := s.ws.artifactPut.ExecContext(ctx, sha256Hex, data); err != nil {
		return s.mapErr(ctx, "put artifact "+sha256Hex, err)
	}
	return nil
}

// ArtifactGet returns the bytes stored under a lowercase hex SHA-256.
// Returns ErrNotFound.
func (s *Store) ArtifactGet(ctx context.Context, sha256Hex string) ([]byte, error) {
	var data []byte
	if err := s.rs.artifactGet.QueryRowContext(ctx, sha256Hex).Scan(&data); err != nil {
		return nil, s.mapErr(ctx, "get artifact "+sha256Hex, err)
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}
