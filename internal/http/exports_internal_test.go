package http

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/hxbundle"
	"hxd/internal/journal"
)

type oneRecord struct{}

func (oneRecord) Records(_ context.Context, fn func(journal.Record) error) error {
	return fn(journal.Record{Version: 1, ID: "a", Kind: journal.KindRunStarted, RecordedAt: "2025-01-02T03:04:05+00:00",
		SessionID: "s1", RunID: "r1", StepID: "0", AttemptID: "0", Payload: []byte(`{}`), Seq: 1})
}

func (oneRecord) OpenArtifact(context.Context, string) (io.ReadCloser, error) {
	return nil, os.ErrNotExist
}

// spooledArchive builds a one-record archive spooled in a fresh folder.
func spooledArchive(t *testing.T) (*hxbundle.Archive, string) {
	t.Helper()
	dir := t.TempDir()
	a, err := hxbundle.Build(context.Background(), hxbundle.RunInfo{RunID: "r1", SessionID: "s1", Status: "completed", Phase: "result"},
		oneRecord{}, hxbundle.Policy{}, dir)
	require.NoError(t, err)
	return a, dir
}

func requireEmptyDir(t *testing.T, dir string) {
	t.Helper()
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, left, "the spool file is removed")
}

// failingWriter is a client that went away after the headers.
type failingWriter struct{ *httptest.ResponseRecorder }

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("connection reset by peer") }

// TestExportStream: the archive streams with its headers and is removed
// afterwards, also when the client goes away mid-stream.
func TestExportStream(t *testing.T) {
	t.Parallel()
	s := &Server{log: slog.New(slog.DiscardHandler)}

	a, dir := spooledArchive(t)
	rec := httptest.NewRecorder()
	require.NoError(t, (&exportStream{s: s, runID: "r1", archive: a}).visit(context.Background(), rec))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, `attachment; filename="r1.hx"`, rec.Header().Get("Content-Disposition"))
	require.Equal(t, "application/vnd.harnessx.incident+zip", rec.Header().Get("Content-Type"))
	require.EqualValues(t, a.Size(), rec.Body.Len())
	require.True(t, rec.Flushed)
	rep := hxbundle.Verify(bytesReaderAt(rec.Body.Bytes()), int64(rec.Body.Len()), hxbundle.Limits{})
	require.True(t, rep.Valid, "%+v", rep)
	requireEmptyDir(t, dir)

	a, dir = spooledArchive(t)
	require.NoError(t, (&exportStream{s: s, runID: "r1", archive: a}).
		visit(context.Background(), failingWriter{httptest.NewRecorder()}))
	requireEmptyDir(t, dir)
}

type bytesReaderAt []byte

func (b bytesReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func TestAttachment(t *testing.T) {
	t.Parallel()
	require.Equal(t, `attachment; filename="0194a3b0-7c1d.hx"`, attachment("0194a3b0-7c1d.hx"))
	require.Equal(t, `attachment; filename="a b.hx"`, attachment("a b.hx"))
	require.Equal(t, `attachment; filename*=utf-8''%C3%A9.hx`, attachment("é.hx"))
	require.Equal(t, "attachment", attachment(""))
}
