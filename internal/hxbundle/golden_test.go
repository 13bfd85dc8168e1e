package hxbundle

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
)

// update regenerates testdata/*.hx and the fuzz seed corpora:
//
//	go test ./internal/hxbundle -update
var update = flag.Bool("update", false, "regenerate testdata/*.hx and testdata/fuzz seeds")

// golden is a committed bundle and what verification says about it.
type golden struct {
	file  string
	build func(t testing.TB) []byte
	valid bool
	// issues are the completeness codes (valid) or the one rejection
	// message (invalid).
	issues []string
	member string // Detail.Member of the rejection
}

// zeros32MiBKey is the SHA-256 of 32 MiB + 1 zero bytes.
const zeros32MiBKey = "bdf7fbb54387c24608fd757a1b31c32cabcd7b6bee8ff3345c897139fffc072a"

func goldens() []golden {
	return []golden{
		{file: "valid-complete.hx", valid: true, issues: []string{},
			build: func(t testing.TB) []byte { return baseBundle().build(t) }},
		{file: "valid-metadata-only.hx", valid: true, issues: []string{IssuePayloadsOmittedOrRedacted},
			build: func(t testing.TB) []byte { return baseBundle().metadataOnly().build(t) }},
		{file: "valid-deflated.hx", valid: true, issues: []string{},
			// Another writer: manifest first, every member DEFLATED with
			// data descriptors (archive/zip's default).
			build: func(t testing.TB) []byte {
				fs := baseBundle().files(t)
				fs = append([]file{fs[len(fs)-1]}, fs[:len(fs)-1]...)
				opts := map[string]zipOpt{}
				for _, f := range fs {
					opts[f.name] = zipOpt{deflate: true}
				}
				return zipWith(t, fs, opts)
			}},
		{file: "valid-awaiting-input.hx", valid: true, issues: []string{IssueRunNotTerminalAtExport, IssueUnresolvedToolOutcome},
			build: func(t testing.TB) []byte {
				b := baseBundle()
				awaiting(b, "uncertain")
				return b.build(t)
			}},
		{file: "tampered-reordered.hx", issues: []string{msgSequence}, member: memberRecords,
			build: func(t testing.TB) []byte {
				b := baseBundle()
				b.records[9], b.records[10] = b.records[10], b.records[9]
				return b.build(t)
			}},
		{file: "tampered-edited-payload.hx", issues: []string{msgMemberChecksum}, member: memberRecords,
			build: func(t testing.TB) []byte {
				b := baseBundle()
				b.editFiles = func(fs []file) []file {
					return replaceFile(fs, memberRecords, bytes.ReplaceAll(fs[0].data, []byte("owes 1630.50"), []byte("owes 9630.50")))
				}
				return b.build(t)
			}},
		{file: "tampered-broken-digest.hx", issues: []string{msgMemberChecksum}, member: artifactPrefix + artKey,
			build: func(t testing.TB) []byte {
				b := baseBundle()
				b.editMembers = func(m map[string]any) {
					m[artifactPrefix+artKey].(map[string]any)["sha256"] = sha([]byte("something else"))
				}
				return b.build(t)
			}},
		{file: "tampered-artifact-bytes.hx", issues: []string{msgArtifactChecksum}, member: artifactPrefix + artKey,
			build: func(t testing.TB) []byte {
				b := baseBundle()
				b.artifacts[artKey] = []byte("INV-1001,0.00,0\n")
				return b.build(t)
			}},
		{file: "tampered-over-limit.hx", issues: []string{msgMemberLimit}, member: artifactPrefix + zeros32MiBKey,
			// 32 MiB + 1 zero bytes, deflated to a few KiB.
			build: func(t testing.TB) []byte {
				big := make([]byte, 32<<20+1)
				name := artifactPrefix + zeros32MiBKey
				require.Equal(t, zeros32MiBKey, sha(big))
				b := baseBundle()
				b.extra = []file{{name, big}}
				return zipWith(t, b.files(t), map[string]zipOpt{name: {deflate: true}})
			}},
		{file: "tampered-uncatalogued-reference.hx", issues: []string{msgCatalog}, member: memberManifest,
			// Issue 18: a record references an artifact that the
			// non-empty catalog does not list; digests re-sealed.
			build: func(t testing.TB) []byte {
				b := baseBundle()
				addUncataloguedRef(b)
				return b.build(t)
			}},
		{file: "tampered-crc.hx", issues: []string{generic(pyBadZipFile)}, member: memberRecords,
			build: func(t testing.TB) []byte {
				data := baseBundle().build(t)
				e := entry(t, data, memberRecords)
				data[e.data+10] ^= 1
				return data
			}},
	}
}

func TestGolden(t *testing.T) {
	t.Parallel()
	for _, g := range goldens() {
		t.Run(g.file, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join("testdata", g.file)
			if *update {
				data := g.build(t)
				require.NoError(t, os.WriteFile(path, data, 0o644))
			}
			f, err := os.Open(path)
			require.NoError(t, err, "run go test ./internal/hxbundle -update")
			defer hxtest.Close(t, f)
			st, err := f.Stat()
			require.NoError(t, err)

			r := Verify(f, st.Size(), DefaultLimits)
			require.Equal(t, g.valid, r.Valid, "%+v", r)
			require.Equal(t, g.issues, r.Issues, "%+v", r.Details)
			p, err := Playback(f, st.Size(), DefaultLimits)
			if !g.valid {
				require.ErrorIs(t, err, ErrInvalidBundle)
				require.Equal(t, g.member, r.Details[0].Member)
				return
			}
			require.NoError(t, err)
			require.Equal(t, r, p.Report)
		})
	}
}

// TestFuzzSeeds writes the committed seed corpora of the fuzz targets
// (with -update). Seeds are small: the fuzzer minimizes every new input
// it finds, which takes long for large ones.
func TestFuzzSeeds(t *testing.T) {
	if !*update {
		t.Skip("run with -update to regenerate")
	}
	for _, dir := range []string{"FuzzVerify", "FuzzRecords", "FuzzStrictJSON"} {
		require.NoError(t, os.RemoveAll(filepath.Join("testdata", "fuzz", dir)))
	}
	small := smallBundle()
	writeSeed(t, "FuzzVerify", "small-complete", small.build(t))
	writeSeed(t, "FuzzVerify", "small-metadata-only", smallBundle().metadataOnly().build(t))
	writeSeed(t, "FuzzVerify", "small-deflated", zipWith(t, small.files(t), map[string]zipOpt{
		memberRecords: {deflate: true}, memberManifest: {deflate: true}, artifactPrefix + artKey: {deflate: true}}))
	writeSeed(t, "FuzzVerify", "small-incomplete", func() []byte {
		b := smallBundle()
		removeKinds(b, "", "model.response")
		return b.build(t)
	}())
	for name, s := range canonicalSeeds(t) {
		writeSeed(t, "FuzzVerify", name, s.data)
	}
	writeSeed(t, "FuzzRecords", "small", small.files(t)[0].data)
	writeSeed(t, "FuzzRecords", "line-breaks", []byte("{}\r\n[]\r{\"a\":NaN}\n\n"))
	writeSeed(t, "FuzzRecords", "event", []byte(`{"attempt_id":"1","capture":"present","execution_key":null,"id":"e","kind":"event",`+
		`"payload":{"attempt_id":"1","cursor":"1","data":{"session_id":"`+tSessionID+`","run_id":"`+tRunID+`","status":"awaiting_input",`+
		`"pending":[{"call":{"id":"c","name":"n","input":[["k","v"]]},"execution_key":"k","status":"approval","attempt":"2","timeout":"1e3",`+
		`"retry":{"attempts":2,"backoff_seconds":null}}]},"event_id":"x","run_id":"`+tRunID+`","session_id":"`+tSessionID+`","step_id":"1",`+
		`"type":"run_result"},"recorded_at":"","run_id":"`+tRunID+`","seq":1,"session_id":"`+tSessionID+`","step_id":"1","version":1}`+"\n"))
	for i, s := range []string{
		`{"a":{"b":[1,2.5,-0,1e5,true,false,null]}}`, `"a\u00e9\ud83d\ude00\/\n"`, `{"a":1,"a":2}`, `[NaN]`, `1e999`,
		`"\ud800"`, "\ufeff{}", `{"k":"artifact:\/\/` + artKey + `\u0061"}`, `[[[[[]]]]]`,
	} {
		writeSeed(t, "FuzzStrictJSON", fmt.Sprintf("seed-%d", i), []byte(s))
	}
}

// writeSeed writes a fuzz seed corpus file.
func writeSeed(t testing.TB, fuzzer, name string, data []byte) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", fuzzer)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
}
