package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVerifyCanonicalArchive: `hxd verify` shows the canonical-archive
// rejections (internal/hxbundle/canonical.go) of a demo bundle with bytes
// prepended or appended, with their detail, and exits 2; the untouched
// bundle still verifies.
func TestVerifyCanonicalArchive(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "x.hx")
	res := runCLI(t, "demo", "flight-recorder", "--output", out)
	require.Equal(t, 0, res.code, res.stdout+res.stderr)
	clean, err := os.ReadFile(out)
	require.NoError(t, err)
	v := runCLI(t, "verify", out)
	require.Equal(t, 0, v.code, v.stdout+v.stderr)

	tests := []struct {
		name, issue, detail string
		data                []byte
	}{
		{name: "trailing", data: append(append([]byte{}, clean...), "junk"...), issue: "Data after the end of the archive",
			detail: fmt.Sprintf("4 bytes at offset %d after the end record and its 0-byte comment", len(clean))},
		{name: "leading", data: append([]byte("#!/bin/sh\n"), clean...), issue: "Data before the first bundle member",
			detail: "10 bytes at offset 0 before the first local header"},
	}
	for _, tt := range tests {
		path := filepath.Join(dir, tt.name+".hx")
		require.NoError(t, os.WriteFile(path, tt.data, 0o600))
		res := runCLI(t, "verify", path)
		require.Equal(t, 2, res.code, res.stdout+res.stderr)
		require.Contains(t, res.stdout, "valid: false, complete: false, records: 0\n"+tt.issue+"\n", tt.name)
		require.Contains(t, res.stdout, "("+tt.detail+")", tt.name)

		res = runCLI(t, "verify", "--json", path)
		require.Equal(t, 2, res.code, res.stdout+res.stderr)
		var rep struct {
			Valid   bool     `json:"valid"`
			Issues  []string `json:"issues"`
			Details []struct {
				Issue   string `json:"issue"`
				Message string `json:"message"`
			} `json:"details"`
		}
		require.NoError(t, json.Unmarshal([]byte(res.stdout), &rep), res.stdout)
		require.False(t, rep.Valid)
		require.Equal(t, []string{tt.issue}, rep.Issues)
		require.Len(t, rep.Details, 1)
		require.Equal(t, tt.issue, rep.Details[0].Issue)
		require.Equal(t, tt.detail, rep.Details[0].Message)
	}
}
