package migrations

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// SQLite holds the SQLite migrations under the directory "sqlite".
//
//go:embed sqlite/*.sql
var SQLite embed.FS

// Postgres holds the PostgreSQL migrations under the directory "postgres"
// (the same version numbers as SQLite).
//
//go:embed postgres/*.sql
var Postgres embed.FS

// Checksums returns the lowercase hex SHA-256 of every up-migration file in
// dir of fsys, keyed by version (the leading digits of the file name).
// Returns an error for a file name without a version or for two up files
// with the same version.
func Checksums(fsys fs.FS, dir string) (map[uint]string, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations %s: %w", dir, err)
	}
	sums := make(map[uint]string)
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".up.sql") {
			continue
		}
		digits, _, ok := strings.Cut(name, "_")
		if !ok {
			return nil, fmt.Errorf("migration %s: name is not NNNN_name.up.sql", name)
		}
		v, err := strconv.ParseUint(digits, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("migration %s: version: %w", name, err)
		}
		if _, dup := sums[uint(v)]; dup {
			return nil, fmt.Errorf("migration %s: duplicate version %d", name, v)
		}
		data, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		sum := sha256.Sum256(data)
		sums[uint(v)] = hex.EncodeToString(sum[:])
	}
	return sums, nil
}
