package hxbundle

import (
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
)

// ErrInvalidBundle is wrapped by every error Playback returns for a bundle
// that fails verification; errors.As gives the *InvalidError.
var ErrInvalidBundle = errors.New("invalid bundle")

// InvalidError is a bundle rejected by verification.
type InvalidError struct {
	// Message is the verifier's message (REFERENCE §7.3), e.g.
	// "Member checksum mismatch".
	Message string
	// Detail says where the failure was found.
	Detail Detail
}

// Error implements error.
func (e *InvalidError) Error() string { return "invalid bundle: " + e.Message }

// Unwrap makes errors.Is(err, ErrInvalidBundle) true.
func (e *InvalidError) Unwrap() error { return ErrInvalidBundle }

// ArtifactInfo describes an artifact included in a bundle.
type ArtifactInfo struct {
	// SHA256 is the artifact key: the lowercase hex SHA-256 of its bytes.
	SHA256 string `json:"sha256"`
	// Size is its length in bytes.
	Size int64 `json:"size"`
}

// Played is a verified bundle opened for playback (REFERENCE §8).
type Played struct {
	// Manifest is the manifest.json text.
	Manifest json.RawMessage
	// Records are the journal records in sequence order, one JSON object
	// each, as they appear in records.jsonl (without line breaks).
	Records []json.RawMessage
	// Report is the verification report (valid; possibly incomplete).
	Report Report
	// Artifacts lists the included artifacts, by ascending SHA256.
	Artifacts []ArtifactInfo

	artifacts map[string][]byte
}

// Artifact returns the bytes of an included artifact by its SHA-256 key.
// The slice is shared: callers must not modify it.
func (p *Played) Artifact(sha string) ([]byte, bool) {
	b, ok := p.artifacts[sha]
	return b, ok
}

// Playback verifies the bundle like Verify and returns its manifest,
// ordered records, report and included artifacts. It only reads r: no
// store, model, tool or network is involved (the package imports none).
// An invalid bundle gives an error wrapping ErrInvalidBundle whose
// *InvalidError carries the verifier's message; an incomplete but valid
// bundle is returned with Report.Complete false. Records and artifacts are
// held in memory (bounded by the limits).
func Playback(r io.ReaderAt, size int64, limits Limits) (*Played, error) {
	res := verify(r, size, limits, true)
	if res.fail != nil {
		d := res.fail.detail
		d.Issue = res.fail.msg
		return nil, &InvalidError{Message: res.fail.msg, Detail: d}
	}
	p := &Played{
		Manifest:  json.RawMessage(res.manifest),
		Records:   make([]json.RawMessage, len(res.records)),
		Report:    res.report,
		Artifacts: []ArtifactInfo{},
		artifacts: make(map[string][]byte, len(res.artifacts)),
	}
	for i, rec := range res.records {
		p.Records[i] = rec
	}
	for name, data := range res.artifacts {
		key := strings.TrimPrefix(name, artifactPrefix)
		p.artifacts[key] = data
		p.Artifacts = append(p.Artifacts, ArtifactInfo{SHA256: key, Size: int64(len(data))})
	}
	slices.SortFunc(p.Artifacts, func(a, b ArtifactInfo) int { return strings.Compare(a.SHA256, b.SHA256) })
	return p, nil
}
