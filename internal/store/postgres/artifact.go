package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/jackc/pgx/v5"

	"hxd/internal/runtime/rtstore"
)

// Artifact SQL. Artifacts are immutable: a known id is left alone.
const (
	sqlArtifactPut = `INSERT INTO artifacts (id, content) VALUES ($1, $2)
ON CONFLICT (id) DO NOTHING`
	sqlArtifactGet = `SELECT content FROM artifacts WHERE id = $1`
	sqlArtifactRef = `INSERT INTO artifact_refs (sha256, session_id) VALUES ($1, $2)
ON CONFLICT (sha256, session_id) DO NOTHING`
	sqlArtifactOwned = `SELECT EXISTS (SELECT 1 FROM artifact_refs r JOIN sessions s ON s.id = r.session_id
WHERE r.sha256 = $1 AND s.principal = $2)`
)

// ArtifactPut stores data under its lowercase hex SHA-256 (a no-op if the
// artifact is present) and links it to the session, atomically in one round
// trip (a pipelined batch without BEGIN runs as one implicit transaction).
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
	if err := s.checkOpen(op); err != nil {
		return err
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	// A foreign key violation is an unknown session, or the artifact was
	// deleted by a concurrent ArtifactSweep between the two statements:
	// then the next attempt stores it again.
	for attempt := 1; ; attempt++ {
		b := &pgx.Batch{}
		b.Queue(sqlArtifactPut, sha256Hex, data)
		b.Queue(sqlArtifactRef, sha256Hex, sessionID)
		err := s.pool.SendBatch(ctx, b).Close()
		if sqlState(err) == codeForeignKeyViolation {
			var exists bool
			if qerr := s.pool.QueryRow(ctx, sqlSessionExists, sessionID).Scan(&exists); qerr != nil {
				return s.mapErr(ctx, op, qerr)
			}
			if exists && attempt < 3 {
				continue
			}
			if exists {
				return s.mapErr(ctx, op, err)
			}
			return fmt.Errorf("%s: session %s: %w", op, sessionID, rtstore.ErrNotFound)
		}
		if err != nil {
			return s.mapErr(ctx, op, err)
		}
		return nil
	}
}

// ArtifactOwned reports whether a session of the principal references the
// artifact.
func (s *Store) ArtifactOwned(ctx context.Context, sha256Hex, principal string) (bool, error) {
	op := "check artifact " + sha256Hex
	if err := s.checkOpen(op); err != nil {
		return false, err
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	var ok bool
	if err := s.pool.QueryRow(ctx, sqlArtifactOwned, sha256Hex, principal).Scan(&ok); err != nil {
		return false, s.mapErr(ctx, op, err)
	}
	return ok, nil
}

// ArtifactGet returns the bytes stored under a lowercase hex SHA-256.
// Returns ErrNotFound.
func (s *Store) ArtifactGet(ctx context.Context, sha256Hex string) ([]byte, error) {
	op := "get artifact " + sha256Hex
	if err := s.checkOpen(op); err != nil {
		return nil, err
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	var data []byte
	if err := s.pool.QueryRow(ctx, sqlArtifactGet, sha256Hex).Scan(&data); err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}
