package hxbundle

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// exPublishArchive builds a small bundle whose records mention tag.
func exPublishArchive(t *testing.T, tag string) *Archive {
	t.Helper()
	a, _ := exBuild(t, exInfo(), &exSource{records: exRecords("run.started", `{"message":"`+tag+`"}`)}, Policy{IncludePayloads: true})
	return a
}

func exArchiveBytes(t *testing.T, a *Archive) []byte {
	t.Helper()
	var buf bytes.Buffer
	_, err := a.WriteTo(&buf)
	require.NoError(t, err)
	return buf.Bytes()
}

// exDirNames lists a folder's entries.
func exDirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestPublish(t *testing.T) {
	t.Parallel()
	a := exPublishArchive(t, "first")
	dir := filepath.Join(t.TempDir(), "nested", "folder")
	path := filepath.Join(dir, "run-1.hx")
	require.NoError(t, a.Publish(path))

	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, exArchiveBytes(t, a), got)
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), info.Mode().Perm())
	require.True(t, info.Mode().IsRegular())
	require.Equal(t, []string{"run-1.hx"}, exDirNames(t, dir), "no temporary file remains")
}

func TestPublishNeverOverwrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "run.hx")
	first, second := exPublishArchive(t, "first"), exPublishArchive(t, "second")
	require.NoError(t, first.Publish(path))
	original, err := os.ReadFile(path)
	require.NoError(t, err)

	err = second.Publish(path)
	require.ErrorIs(t, err, fs.ErrExist)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, original, got)
	require.Equal(t, []string{"run.hx"}, exDirNames(t, dir))

	// A foreign file is never replaced either.
	other := filepath.Join(dir, "other.hx")
	require.NoError(t, os.WriteFile(other, []byte("keep"), 0o644))
	require.ErrorIs(t, first.Publish(other), fs.ErrExist)
	got, err = os.ReadFile(other)
	require.NoError(t, err)
	require.Equal(t, "keep", string(got))
	require.ElementsMatch(t, []string{"run.hx", "other.hx"}, exDirNames(t, dir))
}

func TestPublishConcurrentlyOnlyOneWins(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "run.hx")
	a := exPublishArchive(t, "race")
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = a.Publish(path) })
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		if err == nil {
			wins++
			continue
		}
		require.ErrorIs(t, err, fs.ErrExist)
	}
	require.Equal(t, 1, wins)
	require.Equal(t, []string{"run.hx"}, exDirNames(t, dir))
}

// TestPublishFailureLeavesNothing injects a failure at every step: the
// destination must not exist and no temporary file may remain.
func TestPublishFailureLeavesNothing(t *testing.T) {
	t.Parallel()
	for _, step := range []string{"write", "sync", "link", "syncdir"} {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			a := exPublishArchive(t, step)
			injected := errors.New("injected failure")
			var seen []string
			a.hook = func(s string) error {
				seen = append(seen, s)
				if s == step {
					return injected
				}
				return nil
			}
			dir := t.TempDir()
			path := filepath.Join(dir, "run.hx")
			err := a.Publish(path)
			require.ErrorIs(t, err, injected)
			require.Equal(t, step, seen[len(seen)-1])
			require.Empty(t, exDirNames(t, dir))

			// The archive is still usable afterwards.
			a.hook = nil
			require.NoError(t, a.Publish(path))
			require.Equal(t, []string{"run.hx"}, exDirNames(t, dir))
		})
	}
}

func TestPublishUnwritableFolder(t *testing.T) {
	t.Parallel()
	a := exPublishArchive(t, "x")
	parent := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(parent, nil, 0o600))
	// A path below a regular file can be neither created nor written.
	err := a.Publish(filepath.Join(parent, "run.hx"))
	require.Error(t, err)
	require.ErrorContains(t, err, "publish bundle")
}

func TestArchiveCloseRemovesSpool(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, err := Build(t.Context(), exInfo(), &exSource{records: exRecords("run.started", `{}`)}, Policy{}, dir)
	require.NoError(t, err)
	names := exDirNames(t, dir)
	require.Len(t, names, 1)
	info, err := os.Stat(filepath.Join(dir, names[0]))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), info.Mode().Perm())
	require.NoError(t, a.Close())
	require.NoError(t, a.Close(), "Close is idempotent")
	require.Empty(t, exDirNames(t, dir))
}
