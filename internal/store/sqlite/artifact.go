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
	sqlArtifactRef = `INSERT INTO artifact_refs (sha256, session_id) VALUES (?, ?)
ON CONFLICT (sha256, session_id) DO NOTHING`
	sqlArtifactOwned = `SELECT EXISTS (SELECT 1 FROM artifact_refs r JOIN sessions s ON s.id = r.session_id
WHERE r.sha256 = ? AND s.principal = ?)`
)

// ArtifactPut stores data under its lowercase hex SHA-256 (a no-op if the
// artifact is present) and links it to the session, in one transaction.
// Returns an error if sha256 is not the digest of data, ErrNotFound for an
// unknown session.
func (s *Store) ArtifactPut(ctx context.Context, sessionID, sha256Hex string, data []byte) error {
	sum := sha256.Sum256(data)
	if want := hex.EncodeToString(sum[:]); sha256Hex != want {
		return fmt.Errorf("put artifact %s: content has sha256 %s", sha256Hex, want)
	}
	if data == nil {
		data = []byte{} // content is NOT NULL
	}
	op := "put artifact " + sha256Hex
	return s.inTx(ctx, op, func(ctx context.Context, t *txn) error {
		if _, err := t.exec(ctx, op, s.ws.artifactPut, sha256Hex, data); err != nil {
			return err
		}
		if _, err := t.exec(ctx, "link artifact "+sha256Hex, s.ws.artifactRef, sha256Hex, sessionID); err != nil {
			return err
		}
		return nil
	})
}

// ArtifactOwned reports whether a session of the principal references the
// artifact.
func (s *Store) ArtifactOwned(ctx context.Context, sha256Hex, principal string) (bool, error) {
	var ok bool
	if err := s.rs.artifactOwned.QueryRowContext(ctx, sha256Hex, principal).Scan(&ok); err != nil {
		return false, s.mapErr(ctx, "check artifact "+sha256Hex, err)
	}
	return ok, nil
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
