package hxbundle

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// REFERENCE §11 items 45–58 that concern reading. Items 48–56 and 58 are
// rows of TestVerifyInvalid and TestCompleteness (named "(item N)"); this
// file checks they are all there and covers the rest.

func TestConformanceItemsCovered(t *testing.T) {
	t.Parallel()
	names := ""
	for _, c := range invalidCases() {
		names += c.name + "\n"
	}
	// TestCompleteness rows.
	names += "model.response removed (item 58)\nmetadata only (item 31)\n"
	for _, item := range []int{47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58} {
		require.Contains(t, names, fmt.Sprintf("(item %d)", item))
	}
}

// Item 45: the reader does not depend on the writer's member order or
// method: manifest first and DEFLATED members with data descriptors are
// accepted (the reference writes records, artifacts, manifest, STORED).
func TestConformance45MemberOrderAndMethod(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("testdata", "valid-deflated.hx"))
	require.NoError(t, err)
	require.Equal(t, memberManifest, layout(t, data)[0].name)
	r := verifyBytes(data, DefaultLimits)
	require.True(t, r.Valid)
	require.True(t, r.Complete)
}

// Item 46: extra manifest keys (hxd writes its own under "hxd") and
// extra record keys are allowed; members never list manifest.json.
func TestConformance46ExtraKeys(t *testing.T) {
	t.Parallel()
	b := baseBundle()
	b.manifest["hxd"] = map[string]any{"version": "1.0.0", "exporter": "test"}
	b.records[0]["extra"] = []any{1, 2}
	r := verifyBytes(b.build(t), DefaultLimits)
	require.True(t, r.Valid, "%+v", r)
	require.True(t, r.Complete)
}

// Item 47: a path-escaping member is rejected and nothing is written.
func TestConformance47NothingWritten(t *testing.T) {
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	require.NoError(t, os.Mkdir(work, 0o755))
	t.Chdir(work)
	b := baseBundle()
	b.extra = []file{{"../escape.py", []byte("import os\n")}}
	data := b.build(t)
	r := verifyBytes(data, DefaultLimits)
	require.Equal(t, []string{msgUnexpectedPath}, r.Issues)
	_, err := os.Stat(filepath.Join(dir, "escape.py"))
	require.ErrorIs(t, err, os.ErrNotExist)
	entries, err := os.ReadDir(work)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// Item 57: limits must be positive (Go has no bool/int confusion).
func TestConformance57Limits(t *testing.T) {
	t.Parallel()
	require.NoError(t, DefaultLimits.Validate())
	// The reference's ValueError text, word for word.
	require.Equal(t, "Bundle limits must be positive integers", ErrInvalidLimits.Error())
	for _, l := range []Limits{
		{MaxBytes: -1, MaxMemberBytes: 1, MaxRecords: 1, MaxMembers: 1},
		{MaxBytes: 1, MaxMemberBytes: 0, MaxRecords: 1, MaxMembers: 1},
	} {
		require.ErrorIs(t, l.Validate(), ErrInvalidLimits)
	}
	data := baseBundle().build(t)
	r := verifyBytes(data, Limits{MaxBytes: 10})
	require.Equal(t, []string{msgByteLimit}, r.Issues)
	// Zero fields take the defaults.
	require.True(t, verifyBytes(data, Limits{}).Valid)
	require.True(t, strings.HasPrefix(generic(pyBadZipFile), "Invalid incident bundle ("))
}
