package hxbundle

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
)

// exRandPayload generates a JSON text with what the export's fast paths
// look at: credential-shaped and ordinary keys (escaped or not, in any
// order, with whitespace), values already "[REDACTED]", strings holding
// JSON, escapes, non-ASCII and numbers in every form.
func exRandPayload(rng *rand.Rand, depth int) string {
	keys := []string{"api_key", "API-Key", "token", "password", "secret", "Authorization", "cookie", "text",
		"content", "a", "b", "z", "é", "usage", "tool_call_id", `api\u005fkey`, `t\u006fken`, `x\ny`, "set-cookie", "passwd"}
	ws := func() string {
		if rng.IntN(3) == 0 {
			return []string{" ", "\n", "\t ", "\r\n  "}[rng.IntN(4)]
		}
		return ""
	}
	quote := func(s string) string {
		b, _ := json.Marshal(s)
		return string(b)
	}
	if depth > 4 {
		return "1"
	}
	switch rng.IntN(14) {
	case 0, 1, 2:
		n := rng.IntN(5)
		var b strings.Builder
		b.WriteString("{" + ws())
		for i := range n {
			if i > 0 {
				b.WriteString("," + ws())
			}
			b.WriteString(`"` + keys[rng.IntN(len(keys))] + `"` + ws() + ":" + ws() + exRandPayload(rng, depth+1) + ws())
		}
		b.WriteString("}")
		return b.String()
	case 3, 4:
		n := rng.IntN(4)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = ws() + exRandPayload(rng, depth+1) + ws()
		}
		return "[" + strings.Join(parts, ",") + "]"
	case 5:
		return []string{`"[REDACTED]"`, `"[REDACTED\u005d"`, `"[redacted]"`, `" [REDACTED]"`}[rng.IntN(4)]
	case 6:
		// A string holding JSON, raw or after whitespace or an escape.
		inner := exRandPayload(rng, depth+1)
		return quote([]string{"", " ", "\n", "\t"}[rng.IntN(4)] + inner)
	case 7:
		return []string{`"{\"token\":1}"`, `"\u007b\"a\":1}"`, `"[1,2]"`, `" {not json"`, `"\n[\"x\"]"`}[rng.IntN(5)]
	case 8:
		return []string{"0", "-0", "1.0", "1e2", "1E+2", "-1.5e-7", "123456789012345678901234567890", "0.25", "1e400", "2.5E3"}[rng.IntN(10)]
	case 9:
		return []string{"true", "false", "null"}[rng.IntN(3)]
	case 10:
		return []string{`"a\/b"`, `"\u00e9\u2028"`, `"\ud83d\ude00"`, `"tab\there \"q\" \\"`, `"\u0001"`, `"é → 日本"`}[rng.IntN(6)]
	default:
		return quote(strings.Repeat("word ", rng.IntN(8)) + strconv.Itoa(rng.IntN(100)))
	}
}

// exFastGeneralLines returns the line appendLine writes for payload with
// its fast paths and through the general path alone.
func exFastGeneralLines(t testing.TB, rules []compiledRule, payload []byte) (fast, general []byte, fastErr, generalErr error) {
	key := "run-1:1:call-1"
	rec := journal.Record{Version: 1, ID: "id", Kind: journal.KindToolReturned,
		RecordedAt: "2025-03-04T05:06:07.891000+00:00", SessionID: "sess", RunID: "run-1",
		StepID: "1", AttemptID: "1", ExecutionKey: &key, Payload: payload, Seq: 1}
	f := &exportRecordEncoder{include: true, rules: rules}
	g := &exportRecordEncoder{include: true, rules: rules, general: true}
	fast, fastErr = f.appendLine(nil, rec)
	general, generalErr = g.appendLine(nil, rec)
	return fast, general, fastErr, generalErr
}

// TestExportFastPathsMatchGeneral compares, over many generated payloads,
// the lines the export's fast paths write (one parse; pass-through when
// auto-redaction changes nothing; credential keys replaced while writing)
// with those of the general path (full redaction tree, then re-parse).
func TestExportFastPathsMatchGeneral(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	ruleSets := [][]Rule{nil, {{Kinds: []string{"model.started"}, Pointer: "/a", Action: "omit"}}}
	redacted := 0
	for _, rs := range ruleSets {
		rules, err := Policy{IncludePayloads: true, Redact: rs}.compile()
		require.NoError(t, err)
		for range 20000 {
			payload := []byte(exRandPayload(rng, 0))
			fast, general, fastErr, generalErr := exFastGeneralLines(t, rules, payload)
			if generalErr != nil {
				require.Error(t, fastErr, "payload %s", payload)
				continue
			}
			require.NoError(t, fastErr, "payload %s", payload)
			require.Equal(t, string(general), string(fast), "payload %s", payload)
			if strings.Contains(string(fast), `"capture":"redacted"`) {
				redacted++
			}
		}
	}
	require.Greater(t, redacted, 1000)
}

// FuzzExportFastPaths checks that the fast paths and the general path
// write the same line for any payload, or both fail.
func FuzzExportFastPaths(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 64 {
		f.Add([]byte(exRandPayload(rng, 0)))
	}
	f.Add([]byte(`{"api_key": {"token": "x"}, "b": [{"Password": "[REDACTED]"}], "a": "{\"x\":1}"}`))
	f.Add([]byte(`{"tool_call_id": "call-1", "content": "text", "api_key": "sk-live"}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		fast, general, fastErr, generalErr := exFastGeneralLines(t, nil, payload)
		if generalErr != nil {
			if fastErr == nil {
				t.Fatalf("payload %q: general path fails (%v), fast path writes %s", payload, generalErr, fast)
			}
			return
		}
		if fastErr != nil {
			t.Fatalf("payload %q: fast path fails (%v), general path writes %s", payload, fastErr, general)
		}
		if string(fast) != string(general) {
			t.Fatalf("payload %q:\nfast    %s\ngeneral %s", payload, fast, general)
		}
	})
}
