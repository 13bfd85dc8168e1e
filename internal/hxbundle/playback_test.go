package hxbundle

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
)

func TestPlayback(t *testing.T) {
	t.Parallel()
	b := baseBundle()
	second := []byte("second artifact\n")
	b.records[11]["payload"].(map[string]any)["content"] = "artifact://" + sha(second) + " and artifact://" + artKey
	b.manifest["artifacts"].(map[string]any)[sha(second)] = map[string]any{"status": "included", "path": artifactPrefix + sha(second)}
	b.artifacts[sha(second)] = second
	data := b.build(t)

	p, err := Playback(bytes.NewReader(data), int64(len(data)), DefaultLimits)
	require.NoError(t, err)
	require.True(t, p.Report.Valid)
	require.True(t, p.Report.Complete, "%+v", p.Report)

	// Records in order, as written (item 61: same record ids in order).
	require.Len(t, p.Records, len(b.records))
	for i, raw := range p.Records {
		var r struct {
			ID  string `json:"id"`
			Seq int    `json:"seq"`
		}
		require.NoError(t, json.Unmarshal(raw, &r))
		require.Equal(t, b.records[i]["id"], r.ID)
		require.Equal(t, i+1, r.Seq)
		require.JSONEq(t, string(marshal(t, b.records[i])), string(raw))
	}
	var m map[string]any
	require.NoError(t, json.Unmarshal(p.Manifest, &m))
	require.Equal(t, tRunID, m["run_id"])

	// Included artifacts, ascending, with sizes and bytes.
	want := []ArtifactInfo{{SHA256: artKey, Size: int64(len(tArtifact))}, {SHA256: sha(second), Size: int64(len(second))}}
	if want[0].SHA256 > want[1].SHA256 {
		want[0], want[1] = want[1], want[0]
	}
	require.Equal(t, want, p.Artifacts)
	got, ok := p.Artifact(artKey)
	require.True(t, ok)
	require.Equal(t, tArtifact, got)
	_, ok = p.Artifact(sha([]byte("nope")))
	require.False(t, ok)

	// The response shape the HTTP API serves.
	out, err := json.Marshal(map[string]any{"manifest": p.Manifest, "records": p.Records, "report": p.Report, "artifacts": p.Artifacts})
	require.NoError(t, err)
	require.Contains(t, string(out), `"artifacts":[{"sha256":"`)
}

func TestPlaybackExcludedArtifactsNotListed(t *testing.T) {
	t.Parallel()
	b := baseBundle()
	b.manifest["artifacts"] = map[string]any{artKey: map[string]any{"status": "omitted", "reason": "export_policy"}}
	b.artifacts = nil
	data := b.build(t)
	p, err := Playback(bytes.NewReader(data), int64(len(data)), DefaultLimits)
	require.NoError(t, err)
	require.Equal(t, []ArtifactInfo{}, p.Artifacts)
	require.Equal(t, []string{IssueArtifactsUnavailable}, p.Report.Issues)
}

func TestPlaybackInvalid(t *testing.T) {
	t.Parallel()
	b := baseBundle()
	b.manifest["record_count"] = 3
	data := b.build(t)
	p, err := Playback(bytes.NewReader(data), int64(len(data)), DefaultLimits)
	require.Nil(t, p)
	require.ErrorIs(t, err, ErrInvalidBundle)
	var ie *InvalidError
	require.True(t, errors.As(err, &ie))
	require.Equal(t, "Record count mismatch", ie.Message)
	require.Equal(t, "invalid bundle: Record count mismatch", err.Error())
	require.Equal(t, memberRecords, ie.Detail.Member)
}

// TestPlaybackFromFile plays a committed bundle from an *os.File, the way
// the CLI does.
func TestPlaybackFromFile(t *testing.T) {
	t.Parallel()
	f, err := os.Open(filepath.Join("testdata", "valid-complete.hx"))
	require.NoError(t, err)
	defer hxtest.Close(t, f)
	st, err := f.Stat()
	require.NoError(t, err)
	p, err := Playback(f, st.Size(), Limits{})
	require.NoError(t, err)
	require.Len(t, p.Records, 21)
	require.Equal(t, []ArtifactInfo{{SHA256: artKey, Size: int64(len(tArtifact))}}, p.Artifacts)
}
