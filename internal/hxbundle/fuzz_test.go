package hxbundle

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"runtime/metrics"
	"slices"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// fuzzLimits keep a fuzzed archive's declared sizes small enough that
// the memory bound below is meaningful.
var fuzzLimits = Limits{MaxBytes: 4 << 20, MaxMemberBytes: 1 << 20, MaxRecords: 1000, MaxMembers: 100}

// allocated is the process's cumulative heap allocation in bytes.
func allocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// memoryBound is what one verification of data may allocate: the read
// buffer, a few copies of the largest member and of the input, and the
// parsed records.
func memoryBound(data []byte) uint64 {
	return 4<<20 + 4*uint64(fuzzLimits.MaxMemberBytes) + 64*uint64(len(data))
}

// checkReport checks the invariants of any report.
func checkReport(t *testing.T, r Report) {
	require.NotNil(t, r.Issues)
	require.NotNil(t, r.Details)
	if !r.Valid {
		require.False(t, r.Complete)
		require.Zero(t, r.RecordCount)
		require.Len(t, r.Issues, 1)
		require.Len(t, r.Details, 1)
		require.Equal(t, r.Issues[0], r.Details[0].Issue)
		require.True(t, utf8.ValidString(r.Details[0].Message) && utf8.ValidString(r.Details[0].Member))
		return
	}
	require.Equal(t, len(r.Issues) == 0, r.Complete)
	seen := map[string]bool{}
	for _, issue := range r.Issues {
		require.False(t, seen[issue], "issue %s twice", issue)
		seen[issue] = true
	}
}

// checkStructure: a bundle Verify accepts is a sound ZIP by an
// independent reader (archive/zip, which also checks CRC-32), with
// exactly the legal members, all listed with the right digests, and as
// many record lines as reported.
func checkStructure(t *testing.T, data []byte, r Report) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err)
	content := map[string][]byte{}
	for _, f := range zr.File {
		require.True(t, validMemberName(f.Name), f.Name)
		rc, err := f.Open()
		require.NoError(t, err, f.Name)
		b, err := io.ReadAll(rc)
		require.NoError(t, err, f.Name)
		require.NoError(t, rc.Close())
		require.NotContains(t, content, f.Name)
		content[f.Name] = b
	}
	var manifest struct {
		Members map[string]struct {
			SHA256 string `json:"sha256"`
			Size   int64  `json:"size"`
		} `json:"members"`
	}
	require.NoError(t, json.Unmarshal(content[memberManifest], &manifest))
	require.Len(t, manifest.Members, len(content)-1)
	for name, d := range manifest.Members {
		require.Equal(t, sha(content[name]), d.SHA256, name)
		require.Equal(t, int64(len(content[name])), d.Size, name)
	}
	require.Equal(t, len(pySplitlines(content[memberRecords])), r.RecordCount)
}

func FuzzVerify(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("PK\x05\x06" + string(make([]byte, 18))))
	f.Fuzz(func(t *testing.T, data []byte) {
		before := allocated()
		r := Verify(bytes.NewReader(data), int64(len(data)), fuzzLimits)
		used := allocated() - before
		require.LessOrEqual(t, used, memoryBound(data), "allocated %d bytes for %d input bytes", used, len(data))
		checkReport(t, r)
		if r.Valid {
			checkStructure(t, data, r)
		}
		p, err := Playback(bytes.NewReader(data), int64(len(data)), fuzzLimits)
		if r.Valid {
			require.NoError(t, err)
			require.Equal(t, r, p.Report)
			require.Len(t, p.Records, r.RecordCount)
		} else {
			var ie *InvalidError
			require.ErrorAs(t, err, &ie)
			require.Equal(t, r.Issues[0], ie.Message)
		}
	})
}

func FuzzRecords(f *testing.F) {
	f.Add([]byte("{\"version\":1,\"seq\":1}\n"))
	base := smallBundle()
	base.manifest["artifacts"] = map[string]any{}
	base.artifacts = nil
	f.Fuzz(func(t *testing.T, records []byte) {
		// records.jsonl replaced, hashes and counts recomputed.
		b := *base
		b.manifest = maps.Clone(base.manifest)
		b.recordsRaw = records
		lines := pySplitlines(records)
		n := len(lines)
		b.manifest["record_count"], b.manifest["last_sequence"] = n, n
		// The catalog lists the references found by the independent
		// oracle: a regex over journal.AppendCanonical of each line.
		catalog, canonical := map[string]any{}, true
		for _, l := range lines {
			refs, ok := refsByCanonical(t, []byte(l))
			canonical = canonical && ok
			for k := range refs {
				catalog[k] = map[string]any{"status": "omitted", "reason": "export_policy"}
			}
		}
		b.manifest["artifacts"] = catalog
		data := b.build(t)
		before := allocated()
		r := Verify(bytes.NewReader(data), int64(len(data)), fuzzLimits)
		used := allocated() - before
		require.LessOrEqual(t, used, memoryBound(data))
		checkReport(t, r)
		if canonical && !r.Valid {
			require.NotEqual(t, msgCatalog, r.Issues[0], "reference discovery disagrees with the canonical form")
		}
		if r.Valid {
			require.Equal(t, n, r.RecordCount)
			checkStructure(t, data, r)
		}
		p, err := Playback(bytes.NewReader(data), int64(len(data)), fuzzLimits)
		if r.Valid {
			require.NoError(t, err)
			require.Len(t, p.Records, n)
			require.Equal(t, r, p.Report)
		} else {
			require.ErrorIs(t, err, ErrInvalidBundle)
		}
	})
}

func FuzzStrictJSON(f *testing.F) {
	for _, s := range []string{
		`{}`, `[1,2.5,-0,1e5,"a\u00e9\ud83d\ude00",true,false,null]`, `{"a":{"b":[{}]}}`, `{"a":1,"a":2}`,
		`NaN`, `[-Infinity]`, `1e999`, `"\ud800"`, "\"\xff\"", "\ufeff{}", `{"artifact://x":"artifact:\/\/` + artKey + `"}`,
		"\"\xed\xa0\x80\"", "\xff\xfe[\x001\x00]\x00", "{\x00}\x00", `[1e999,NaN]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var d jsonDoc
		e := d.parse(data)
		valid := json.Valid(data)
		if e == nil {
			strict := d.strictOnly()
			if strict == nil {
				// Everything the strict loader accepts without hxd's own
				// reservations is JSON in UTF-8.
				require.True(t, valid, "accepted invalid JSON %q", data)
				require.True(t, utf8.Valid(data))
			} else {
				require.Contains(t, []string{msgNonFinite, generic(pyJSONDecodeError), generic(pyUnicodeDecodeError)}, strict.msg)
			}
			if valid && utf8.Valid(data) {
				// Of valid JSON in UTF-8, hxd refuses only an overflowing
				// float literal, which json.loads reads as an infinity.
				overflows := slices.Contains(strictReason(data), msgNonFinite)
				require.Equal(t, overflows, strict != nil, "input %q", data)
				if overflows {
					require.Equal(t, msgNonFinite, strict.msg)
				}
			}
			// Values are consistent: a value equals itself (Python ==).
			require.True(t, pyEqual(d.root(), d.root()))
			// Reference discovery agrees with the canonical serialization.
			if !d.surrogate && d.overflow == 0 && d.encoding == "" {
				want, ok := refsByCanonical(t, data)
				if ok {
					got, ok := refsByStream(data)
					require.True(t, ok)
					require.Equal(t, slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got)))
				}
			}
			return
		}
		if !valid || !utf8.Valid(data) {
			return // rejected by both (Go does not check UTF-8 in strings)
		}
		// Valid JSON rejected: only for the loader's own reasons (and
		// never an overflowing float literal, which json.loads reads).
		require.NotEqual(t, msgNonFinite, e.msg, "input %q", data)
		reason := strictReason(data)
		require.NotEmpty(t, reason, "rejected valid JSON %q with %q", data, e.msg)
		require.Contains(t, reason, e.msg, "input %q", data)
	})
}

// strictReason lists, by an independent token walk with encoding/json,
// the strict loader's reasons to reject a valid JSON text: duplicate keys,
// an integer literal over 4300 digits, nesting deeper than maxJSONDepth
// (parse), a float literal overflowing float64 (strictOnly).
func strictReason(data []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		object bool
		keys   map[string]bool
		expect bool // next string token is a key
	}
	var stack []*frame
	var reasons []string
	add := func(r string) {
		if !slices.Contains(reasons, r) {
			reasons = append(reasons, r)
		}
	}
	afterValue := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].expect = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		top := (*frame)(nil)
		if n := len(stack); n > 0 {
			top = stack[n-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if top != nil && top.object {
					top.expect = false
				}
				stack = append(stack, &frame{object: v == '{', keys: map[string]bool{}, expect: v == '{'})
				if len(stack) > maxJSONDepth {
					add(generic(pyRecursionError))
				}
			default:
				stack = stack[:len(stack)-1]
				afterValue()
			}
		case string:
			if top != nil && top.object && top.expect {
				if top.keys[v] {
					add(msgDuplicateKey)
				}
				top.keys[v] = true
				top.expect = false
				continue
			}
			afterValue()
		case json.Number:
			lit := v.String()
			if bytes.ContainsAny([]byte(lit), ".eE") {
				if _, err := strconv.ParseFloat(lit, 64); err != nil {
					add(msgNonFinite)
				}
			} else if len(bytes.TrimPrefix([]byte(lit), []byte("-"))) > maxIntDigits {
				add(generic(pyValueError))
			}
			afterValue()
		default:
			afterValue()
		}
	}
	return reasons
}
