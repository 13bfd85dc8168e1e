package hxbundle

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
)

// exRedactPayload runs the per-record payload processing of an export with
// payloads and rules, and returns the exported payload (canonical) and
// its capture status.
func exRedactPayload(t *testing.T, rules []Rule, kind journal.Kind, payload string) (string, string) {
	t.Helper()
	compiled, err := Policy{IncludePayloads: true, Redact: rules}.compile()
	require.NoError(t, err)
	enc := exportRecordEncoder{include: true, rules: compiled}
	out, capture, err := enc.payload(kind, []byte(payload))
	require.NoError(t, err)
	canon, err := journal.AppendCanonical(nil, out)
	require.NoError(t, err)
	// The export's own path (parsed once, auto-redaction pre-checked on
	// the parsed strings) gives the same payload and capture.
	doc, text, docCapture, err := enc.payloadDoc(kind, []byte(payload))
	require.NoError(t, err)
	docOut := "null"
	if doc != nil {
		require.Nil(t, text)
		docOut = string(doc.AppendCanonical(nil))
	} else if text != nil {
		docOut = string(text)
	}
	require.Equal(t, string(canon), docOut)
	require.Equal(t, capture, docCapture)
	return string(canon), capture
}

// exQuote returns s as a JSON string literal (for JSON-in-string rows).
func exQuote(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return string(b)
}

func TestRedactAutomatic(t *testing.T) {
	t.Parallel()
	js := func(s string) string { return exQuote(t, s) }
	tests := []struct {
		name    string
		payload string
		want    string // canonical
		capture string
	}{
		// REFERENCE §5.5: redacted keys, whatever the value's type.
		{name: "api_key string", payload: `{"api_key":"sk-1","x":1}`, want: `{"api_key":"[REDACTED]","x":1}`, capture: "redacted"},
		{name: "API-Key number", payload: `{"API-Key":12345}`, want: `{"API-Key":"[REDACTED]"}`, capture: "redacted"},
		{name: "apiKey object", payload: `{"apiKey":{"v":"x"}}`, want: `{"apiKey":"[REDACTED]"}`, capture: "redacted"},
		{name: "password2 array", payload: `{"password2":["a","b"]}`, want: `{"password2":"[REDACTED]"}`, capture: "redacted"},
		{name: "Password2 bool", payload: `{"Password2":true}`, want: `{"Password2":"[REDACTED]"}`, capture: "redacted"},
		{name: "Set-Cookie null", payload: `{"Set-Cookie":null}`, want: `{"Set-Cookie":"[REDACTED]"}`, capture: "redacted"},
		{name: "Proxy-Authorization", payload: `{"Proxy-Authorization":"Basic x"}`, want: `{"Proxy-Authorization":"[REDACTED]"}`, capture: "redacted"},
		{name: "client_secret", payload: `{"client_secret":"s"}`, want: `{"client_secret":"[REDACTED]"}`, capture: "redacted"},
		{name: "authorization", payload: `{"Authorization":"Bearer t"}`, want: `{"Authorization":"[REDACTED]"}`, capture: "redacted"},
		{name: "access and refresh token", payload: `{"access_token":"a","refresh-token":"r"}`, want: `{"access_token":"[REDACTED]","refresh-token":"[REDACTED]"}`, capture: "redacted"},
		{name: "secret and cookie", payload: `{"SECRET":1.5,"cookie":"c"}`, want: `{"SECRET":"[REDACTED]","cookie":"[REDACTED]"}`, capture: "redacted"},
		{name: "spaces and digits deleted", payload: `{"pass word 1":"x"}`, want: `{"pass word 1":"[REDACTED]"}`, capture: "redacted"},
		{name: "non-ASCII letters deleted", payload: `{"pass\u00e9word":"x"}`, want: `{"passéword":"[REDACTED]"}`, capture: "redacted"},
		{name: "dotted capital I lowercases to i", payload: `{"apİ_key":"x"}`, want: `{"apİ_key":"[REDACTED]"}`, capture: "redacted"},
		{name: "escaped key", payload: `{"api\u005fkey":"x"}`, want: `{"api_key":"[REDACTED]"}`, capture: "redacted"},
		// REFERENCE §5.5: keys left alone.
		{name: "x-api-key untouched", payload: `{"x-api-key":"k"}`, want: `{"x-api-key":"k"}`, capture: "present"},
		{name: "token untouched", payload: `{"token":"t"}`, want: `{"token":"t"}`, capture: "present"},
		{name: "secret_key untouched", payload: `{"secret_key":"s"}`, want: `{"secret_key":"s"}`, capture: "present"},
		{name: "bearer untouched", payload: `{"bearer":"b"}`, want: `{"bearer":"b"}`, capture: "present"},
		{name: "private_key untouched", payload: `{"private_key":"p"}`, want: `{"private_key":"p"}`, capture: "present"},
		{name: "passwords untouched", payload: `{"passwords":"p"}`, want: `{"passwords":"p"}`, capture: "present"},
		{name: "value named password untouched", payload: `{"field":"password"}`, want: `{"field":"password"}`, capture: "present"},
		// Structure.
		{name: "nested objects and arrays", payload: `{"a":[{"b":{"password":"p","keep":1}},{"cookie":"c"}],"z":[1,2]}`,
			want: `{"a":[{"b":{"keep":1,"password":"[REDACTED]"}},{"cookie":"[REDACTED]"}],"z":[1,2]}`, capture: "redacted"},
		{name: "already redacted stays present", payload: `{"password":"[REDACTED]"}`, want: `{"password":"[REDACTED]"}`, capture: "present"},
		{name: "numbers keep their literal", payload: `{"timeout":300.0,"n":12345678901234567890123,"password":"x"}`,
			want: `{"n":12345678901234567890123,"password":"[REDACTED]","timeout":300.0}`, capture: "redacted"},
		{name: "stored null is omitted", payload: `null`, want: `null`, capture: "omitted"},
		// JSON held in strings.
		{name: "JSON-in-string canonical", payload: `{"arguments":` + js(`{"api_key":"c","value":7}`) + `}`,
			want: `{"arguments":` + js(`{"api_key":"[REDACTED]","value":7}`) + `}`, capture: "redacted"},
		{name: "JSON-in-string reordered and compacted", payload: `{"s":` + js(`{ "z": 1,  "secret": "s" }`) + `}`,
			want: `{"s":` + js(`{"secret":"[REDACTED]","z":1}`) + `}`, capture: "redacted"},
		{name: "unchanged JSON string keeps its formatting", payload: `{"s":` + js(`{ "b": 1,  "a": [1, 2.50] }`) + `}`,
			want: `{"s":` + js(`{ "b": 1,  "a": [1, 2.50] }`) + `}`, capture: "present"},
		{name: "JSON string with redacted value only is unchanged", payload: `{"s":` + js(`{ "password" : "[REDACTED]" }`) + `}`,
			want: `{"s":` + js(`{ "password" : "[REDACTED]" }`) + `}`, capture: "present"},
		{name: "nested JSON-in-JSON", payload: `{"s":` + js(`{"inner": `+js(`{"password": "x", "k": 1}`)+`, "o": 2}`) + `}`,
			want: `{"s":` + js(`{"inner":`+js(`{"k":1,"password":"[REDACTED]"}`)+`,"o":2}`) + `}`, capture: "redacted"},
		{name: "leading and trailing whitespace", payload: `{"s":` + js(" \n\t{\"token\":1,\"secret\":2}\r\n ") + `}`,
			want: `{"s":` + js(`{"secret":"[REDACTED]","token":1}`) + `}`, capture: "redacted"},
		{name: "array document in string", payload: `[` + js(`[{"cookie":"x"},"y"]`) + `]`,
			want: `[` + js(`[{"cookie":"[REDACTED]"},"y"]`) + `]`, capture: "redacted"},
		{name: "string payload", payload: js(`{"password":"p"}`), want: js(`{"password":"[REDACTED]"}`), capture: "redacted"},
		{name: "invalid JSON-looking string kept", payload: `{"s":` + js(`{password: x}`) + `}`,
			want: `{"s":` + js(`{password: x}`) + `}`, capture: "present"},
		{name: "truncated JSON kept", payload: `{"s":` + js(`[{"password":"x"}`) + `}`,
			want: `{"s":` + js(`[{"password":"x"}`) + `}`, capture: "present"},
		{name: "duplicate keys kept verbatim", payload: `{"s":` + js(`{"password":"a","password":"b"}`) + `}`,
			want: `{"s":` + js(`{"password":"a","password":"b"}`) + `}`, capture: "present"},
		{name: "NaN kept verbatim", payload: `{"s":` + js(`{"password":NaN}`) + `}`,
			want: `{"s":` + js(`{"password":NaN}`) + `}`, capture: "present"},
		{name: "trailing garbage kept verbatim", payload: `{"s":` + js(`{"password":"x"} x`) + `}`,
			want: `{"s":` + js(`{"password":"x"} x`) + `}`, capture: "present"},
		{name: "non-JSON whitespace prefix kept verbatim", payload: `{"s":` + js("\u00a0{\"password\":\"x\"}") + `}`,
			want: `{"s":` + js("\u00a0{\"password\":\"x\"}") + `}`, capture: "present"},
		{name: "overflowing number fails closed", payload: `{"s":` + js(`{"password":"x","n":1e999}`) + `}`,
			want: `{"s":"[REDACTED]"}`, capture: "redacted"},
		{name: "key holding JSON is not parsed", payload: `{"{\"x\":{\"password\":1}}":"v"}`, want: `{"{\"x\":{\"password\":1}}":"v"}`, capture: "present"},
		{name: "key holding JSON normalizes like any key", payload: `{"{\"password\":1}":"v"}`, want: `{"{\"password\":1}":"[REDACTED]"}`, capture: "redacted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, capture := exRedactPayload(t, nil, journal.KindToolReturned, tt.payload)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.capture, capture)
		})
	}
}

func TestRedactRules(t *testing.T) {
	t.Parallel()
	js := func(s string) string { return exQuote(t, s) }
	tests := []struct {
		name    string
		rules   []Rule
		kind    journal.Kind
		payload string
		want    string
		capture string
	}{
		{name: "omit by kind", rules: []Rule{{Kinds: []string{"model.response"}, Action: "omit"}},
			kind: journal.KindModelResponse, payload: `{"text":"hi"}`, want: `null`, capture: "omitted"},
		{name: "omit other kind untouched", rules: []Rule{{Kinds: []string{"model.response"}, Action: "omit"}},
			kind: journal.KindToolReturned, payload: `{"text":"hi"}`, want: `{"text":"hi"}`, capture: "present"},
		{name: "omit every kind", rules: []Rule{{Action: "omit"}},
			kind: journal.KindCheckpoint, payload: `{"phase":"x"}`, want: `null`, capture: "omitted"},
		{name: "pointer omit member", rules: []Rule{{Pointer: "/usage/input_tokens", Action: "omit"}},
			kind: journal.KindModelResponse, payload: `{"usage":{"input_tokens":3,"output_tokens":4},"text":"t"}`,
			want: `{"text":"t","usage":{"output_tokens":4}}`, capture: "redacted"},
		{name: "pointer omit array element", rules: []Rule{{Pointer: "/messages/1", Action: "omit"}},
			kind: journal.KindModelStarted, payload: `{"messages":["a","b","c"]}`, want: `{"messages":["a","c"]}`, capture: "redacted"},
		{name: "pointer escapes", rules: []Rule{{Pointer: "/a~1b/c~0d", Action: "omit"}},
			kind: journal.KindToolReturned, payload: `{"a/b":{"c~d":1,"e":2}}`, want: `{"a/b":{"e":2}}`, capture: "redacted"},
		{name: "missing pointer is a no-op", rules: []Rule{{Pointer: "/nope/deeper", Action: "omit"}},
			kind: journal.KindToolReturned, payload: `{"a":1}`, want: `{"a":1}`, capture: "present"},
		{name: "index out of range is a no-op", rules: []Rule{{Pointer: "/a/5", Action: "omit"}, {Pointer: "/a/-", Action: "omit"}, {Pointer: "/a/01", Action: "omit"}},
			kind: journal.KindToolReturned, payload: `{"a":[1,2]}`, want: `{"a":[1,2]}`, capture: "present"},
		{name: "step into scalar is a no-op", rules: []Rule{{Pointer: "/a/b", Action: "replace", Value: json.RawMessage(`1`)}},
			kind: journal.KindToolReturned, payload: `{"a":"s"}`, want: `{"a":"s"}`, capture: "present"},
		{name: "pointer replace", rules: []Rule{{Pointer: "/call/input/account", Action: "replace", Value: json.RawMessage(`"acct-***"`)}},
			kind: journal.KindToolDispatched, payload: `{"call":{"input":{"account":"acct-42"},"name":"n"}}`,
			want: `{"call":{"input":{"account":"acct-***"},"name":"n"}}`, capture: "redacted"},
		{name: "replace missing member creates nothing", rules: []Rule{{Pointer: "/call/extra", Action: "replace", Value: json.RawMessage(`1`)}},
			kind: journal.KindToolDispatched, payload: `{"call":{}}`, want: `{"call":{}}`, capture: "present"},
		{name: "replace whole payload", rules: []Rule{{Action: "replace", Value: json.RawMessage(`{"note":"removed"}`)}},
			kind: journal.KindToolReturned, payload: `{"a":1}`, want: `{"note":"removed"}`, capture: "redacted"},
		{name: "replace whole payload by a string (REFERENCE §12.9)", rules: []Rule{{Action: "replace", Value: json.RawMessage(`"withheld"`)}},
			kind: journal.KindModelResponse, payload: `{"a":1}`, want: `"withheld"`, capture: "redacted"},
		{name: "replace with null omits", rules: []Rule{{Action: "replace", Value: json.RawMessage(`null`)}},
			kind: journal.KindToolReturned, payload: `{"a":1}`, want: `null`, capture: "omitted"},
		{name: "replace 1 by 1.0 is still present", rules: []Rule{{Pointer: "/n", Action: "replace", Value: json.RawMessage(`1.0`)}},
			kind: journal.KindToolReturned, payload: `{"n":1}`, want: `{"n":1.0}`, capture: "present"},
		{name: "replace 1 by true is still present", rules: []Rule{{Pointer: "/n", Action: "replace", Value: json.RawMessage(`true`)}},
			kind: journal.KindToolReturned, payload: `{"n":1}`, want: `{"n":true}`, capture: "present"},
		{name: "replace 1 by 2 is redacted", rules: []Rule{{Pointer: "/n", Action: "replace", Value: json.RawMessage(`2`)}},
			kind: journal.KindToolReturned, payload: `{"n":1}`, want: `{"n":2}`, capture: "redacted"},
		{name: "injected password is redacted by the second pass", rules: []Rule{{Pointer: "/meta", Action: "replace", Value: json.RawMessage(`{"Password":"hunter2","ok":true}`)}},
			kind: journal.KindToolReturned, payload: `{"meta":1}`, want: `{"meta":{"Password":"[REDACTED]","ok":true}}`, capture: "redacted"},
		{name: "injected JSON-in-string secret is redacted", rules: []Rule{{Pattern: `x`, Replace: `{"secret":"s"}`}},
			kind: journal.KindToolReturned, payload: `{"note":"x"}`, want: `{"note":` + js(`{"secret":"[REDACTED]"}`) + `}`, capture: "redacted"},
		{name: "rules run on the auto-redacted copy", rules: []Rule{{Pattern: `\[REDACTED\]`, Replace: "sk-live"}},
			kind: journal.KindToolReturned, payload: `{"api_key":"sk-live"}`, want: `{"api_key":"[REDACTED]"}`, capture: "redacted"},
		{name: "regex scrubStrings nested strings, not keys", rules: []Rule{{Pattern: `\d{16}`, Replace: "[card]"}},
			kind: journal.KindToolReturned, payload: `{"content":[{"text":"card 4111111111111111 ok"}],"4111111111111111":"4111111111111111x","n":4111111111111111}`,
			want: `{"4111111111111111":"[card]x","content":[{"text":"card [card] ok"}],"n":4111111111111111}`, capture: "redacted"},
		{name: "regex groups", rules: []Rule{{Pattern: `(\w+)@example\.com`, Replace: "$1@***"}},
			kind: journal.KindToolReturned, payload: `{"to":"bob@example.com"}`, want: `{"to":"bob@***"}`, capture: "redacted"},
		{name: "regex scrubs JSON-in-string as text", rules: []Rule{{Pattern: `\d{4}-\d{4}`, Replace: "####"}},
			kind: journal.KindToolReturned, payload: `{"args":` + js(`{"card": "1234-5678"}`) + `}`,
			want: `{"args":` + js(`{"card": "####"}`) + `}`, capture: "redacted"},
		{name: "regex without match is present", rules: []Rule{{Pattern: `zzz`, Replace: "y"}},
			kind: journal.KindToolReturned, payload: `{"a":"b"}`, want: `{"a":"b"}`, capture: "present"},
		{name: "regex restricted by kinds", rules: []Rule{{Kinds: []string{"tool.processed"}, Pattern: `b`, Replace: "c"}},
			kind: journal.KindToolReturned, payload: `{"a":"b"}`, want: `{"a":"b"}`, capture: "present"},
		{name: "rules apply in order", rules: []Rule{{Action: "omit"}, {Action: "replace", Value: json.RawMessage(`{"x":1}`)}},
			kind: journal.KindToolReturned, payload: `{"a":1}`, want: `{"x":1}`, capture: "redacted"},
		{name: "scrubStrings then restore is present", rules: []Rule{{Pattern: `b`, Replace: "c"}, {Pattern: `c`, Replace: "b"}},
			kind: journal.KindToolReturned, payload: `{"a":"b"}`, want: `{"a":"b"}`, capture: "present"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, capture := exRedactPayload(t, tt.rules, tt.kind, tt.payload)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.capture, capture)
		})
	}
}

// TestRedactRulesDoNotMutateStored checks that a replacement value used
// twice is copied (a later scrubStrings must not edit the rule's value).
func TestRedactRulesDoNotMutateStored(t *testing.T) {
	t.Parallel()
	rules := []Rule{
		{Pointer: "/a", Action: "replace", Value: json.RawMessage(`{"s":"keep"}`)},
		{Pattern: "keep", Replace: "gone"},
	}
	compiled, err := Policy{IncludePayloads: true, Redact: rules}.compile()
	require.NoError(t, err)
	enc := exportRecordEncoder{include: true, rules: compiled}
	for range 2 {
		stored := []byte(`{"a":1}`)
		out, capture, err := enc.payload(journal.KindToolReturned, stored)
		require.NoError(t, err)
		require.JSONEq(t, `{"a":{"s":"gone"}}`, string(out))
		require.Equal(t, "redacted", capture)
		require.Equal(t, `{"a":1}`, string(stored))
	}
	require.Equal(t, "keep", compiled[0].value.obj[0].val.text())
}

func TestSensitiveKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		key  string
		want bool
	}{
		{name: "api_key", key: "api_key", want: true},
		{name: "API-Key", key: "API-Key", want: true},
		{name: "apiKey", key: "apiKey", want: true},
		{name: "password2", key: "password2", want: true},
		{name: "Set-Cookie", key: "Set-Cookie", want: true},
		{name: "Proxy-Authorization", key: "Proxy-Authorization", want: true},
		{name: "client_secret", key: "client_secret", want: true},
		{name: "kelvin sign", key: "coo\u212Aie", want: true},
		{name: "x-api-key", key: "x-api-key"},
		{name: "token", key: "token"},
		{name: "secret_key", key: "secret_key"},
		{name: "bearer", key: "bearer"},
		{name: "private_key", key: "private_key"},
		{name: "empty", key: ""},
		{name: "long", key: strings.Repeat("password", 5)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, isCredentialKey(tt.key))
			require.Equal(t, tt.want, isCredentialKeyBytes([]byte(tt.key)))
			// The scanner must never miss what the tree pass redacts.
			require.Equal(t, tt.want, mightRedact([]byte(`{`+exQuote(t, tt.key)+`:1}`), 0))
		})
	}
}

// TestRedactScannerAgreesWithTree checks the fast pre-check: whenever it
// answers "nothing to redact", the full pass changes nothing.
func TestRedactScannerAgreesWithTree(t *testing.T) {
	t.Parallel()
	js := func(s string) string { return exQuote(t, s) }
	payloads := []string{
		`{"a":"b"}`,
		`{"a":"\"password\":"}`,
		`{"a":"x\\","password":1}`,
		`{"a":` + js(`{"b":`+js(`{"secret":1}`)+`}`) + `}`,
		`{"a":` + js(`["c", {"cookie": 1}]`) + `}`,
		`{"a":` + js(`{"b":"[1,2]"}`) + `}`,
		`{"p\u0061ssword":1}`,
		`["password", {"k":"v"}]`,
		`{"list":[` + js(`  [ {"token": 1} ]`) + `]}`,
	}
	for _, p := range payloads {
		v, err := parsePayload([]byte(p))
		require.NoError(t, err, p)
		changed := autoRedact(&v)
		if !mightRedact([]byte(p), 0) {
			require.False(t, changed, p)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		policy  Policy
		wantErr string // substring; "" means valid
	}{
		{name: "zero policy", policy: Policy{}},
		{name: "full policy", policy: Policy{IncludePayloads: true, IncludeArtifacts: true, Redact: []Rule{
			{Kinds: []string{"model.response", "tool.returned"}, Action: "omit"},
			{Pointer: "/a/0/~1b", Action: "omit"},
			{Pointer: "/a", Action: "replace", Value: json.RawMessage(`{"x":[1,2.0]}`)},
			{Pattern: `\d+`, Replace: "#"},
			{Pattern: `secret`},
		}, Limits: Limits{MaxBytes: 1 << 20}}},
		{name: "artifacts need payloads", policy: Policy{IncludeArtifacts: true}, wantErr: "Artifact export also requires include_payloads=True"},
		{name: "unknown action", policy: Policy{Redact: []Rule{{Action: "drop"}}}, wantErr: `redact[0]: unknown action "drop"`},
		{name: "empty rule", policy: Policy{Redact: []Rule{{}}}, wantErr: "missing action"},
		{name: "unknown kind", policy: Policy{Redact: []Rule{{Kinds: []string{"model.reply"}, Action: "omit"}}}, wantErr: `unknown record kind "model.reply"`},
		{name: "pointer without slash", policy: Policy{Redact: []Rule{{Pointer: "a/b", Action: "omit"}}}, wantErr: "must be empty or start with /"},
		{name: "bad pointer escape", policy: Policy{Redact: []Rule{{Pointer: "/a~2", Action: "omit"}}}, wantErr: "~ must be followed by 0 or 1"},
		{name: "trailing tilde", policy: Policy{Redact: []Rule{{Pointer: "/a~", Action: "omit"}}}, wantErr: "~ must be followed by 0 or 1"},
		{name: "replace without value", policy: Policy{Redact: []Rule{{Pointer: "/a", Action: "replace"}}}, wantErr: "needs a value"},
		{name: "replace with invalid value", policy: Policy{Redact: []Rule{{Pointer: "/a", Action: "replace", Value: json.RawMessage(`{"a":1,"a":2}`)}}}, wantErr: "value"},
		{name: "replace with a non-finite value", policy: Policy{Redact: []Rule{{Pointer: "/a", Action: "replace", Value: json.RawMessage(`1e999`)}}}, wantErr: "value"},
		{name: "replace with a lone surrogate", policy: Policy{Redact: []Rule{{Pointer: "/a", Action: "replace", Value: json.RawMessage(`"\ud800"`)}}}, wantErr: "value"},
		{name: "omit with value", policy: Policy{Redact: []Rule{{Action: "omit", Value: json.RawMessage(`1`)}}}, wantErr: "takes no value"},
		{name: "regex does not compile", policy: Policy{Redact: []Rule{{Pattern: `(`, Replace: "x"}}}, wantErr: "pattern does not compile"},
		{name: "pattern with action", policy: Policy{Redact: []Rule{{Pattern: `a`, Action: "omit"}}}, wantErr: "takes no action"},
		{name: "replace text without pattern", policy: Policy{Redact: []Rule{{Action: "omit", Replace: "x"}}}, wantErr: "replace needs a pattern"},
		{name: "negative limit", policy: Policy{Limits: Limits{MaxRecords: -1}}, wantErr: "Bundle limits must be positive integers"},
		{name: "limit beyond ZIP", policy: Policy{Limits: Limits{MaxBytes: 1 << 33}}, wantErr: "fit a ZIP without ZIP64"},
		{name: "too many members for ZIP", policy: Policy{Limits: Limits{MaxMembers: 70000}}, wantErr: "fit a ZIP without ZIP64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.policy.Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidPolicy)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestPolicyValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	err := Policy{IncludeArtifacts: true, Redact: []Rule{{Action: "x"}, {Pattern: "("}}, Limits: Limits{MaxBytes: -1}}.Validate()
	require.ErrorIs(t, err, ErrInvalidPolicy)
	require.ErrorIs(t, err, ErrInvalidLimits)
	for _, want := range []string{"include_payloads=True", "redact[0]", "redact[1]", "positive integers"} {
		require.ErrorContains(t, err, want)
	}
}

func TestPolicyJSON(t *testing.T) {
	t.Parallel()
	var p Policy
	require.NoError(t, json.Unmarshal([]byte(`{
		"include_payloads": true,
		"include_artifacts": true,
		"redact": [
			{"kinds": ["model.response"], "action": "omit"},
			{"pointer": "/usage", "action": "replace", "value": {"n": 1}},
			{"pattern": "\\d{16}", "replace": "[card]"}
		],
		"limits": {"max_bytes": 1048576}
	}`), &p))
	require.NoError(t, p.Validate())
	require.Equal(t, Policy{
		IncludePayloads:  true,
		IncludeArtifacts: true,
		Redact: []Rule{
			{Kinds: []string{"model.response"}, Action: "omit"},
			{Pointer: "/usage", Action: "replace", Value: json.RawMessage(`{"n": 1}`)},
			{Pattern: `\d{16}`, Replace: "[card]"},
		},
		Limits: Limits{MaxBytes: 1 << 20},
	}, p)
	l := p.EffectiveLimits()
	require.Equal(t, Limits{MaxBytes: 1 << 20, MaxMemberBytes: DefaultLimits.MaxMemberBytes,
		MaxRecords: DefaultLimits.MaxRecords, MaxMembers: DefaultLimits.MaxMembers}, l)
}

// FuzzRedactScanner checks the invariant the fast path relies on: when
// mightRedact says "nothing to redact", the full pass changes nothing,
// and a second full pass never changes anything.
func FuzzRedactScanner(f *testing.F) {
	for _, seed := range []string{
		`{"a":"b"}`,
		`{"api_key":"x"}`,
		`{"s":"{\"password\":1}"}`,
		`{"s":" [ {\"Set-Cookie\": [1]} ] "}`,
		`["{\"x\":\"{\\\"secret\\\":1}\"}"]`,
		`{"k\u0065y":"\u007b\"token\":1}"}`,
		`"{\"cookie\":null}"`,
		`{"a":{"b":[{"c":"[\"d\", {\"refresh_token\": 2}]"}]}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		v, err := parsePayload(src)
		if err != nil {
			return
		}
		changed := autoRedact(&v)
		if changed {
			require.True(t, mightRedact(src, 0), "scanner missed a redaction in %s", src)
		}
		// The export's pre-check on the parsed payload agrees with the
		// scanner.
		var doc journal.Doc
		if doc.Parse(src, 1) == nil {
			require.Equal(t, mightRedact(src, 0), docMightRedact(&doc), "pre-checks disagree on %s", src)
		}
		out := v.appendJSON(nil)
		again, err := parsePayload(out)
		require.NoError(t, err)
		require.False(t, autoRedact(&again), "second pass changed %s", out)
	})
}

// exLineOracle is how an exported line used to be made: the fields
// assembled as plain JSON, the whole record through the canonical encoder.
func exLineOracle(enc *exportRecordEncoder, rec journal.Record) ([]byte, error) {
	payload, capture, err := enc.payload(rec.Kind, rec.Payload)
	if err != nil {
		return nil, err
	}
	s := []byte(`{"attempt_id":`)
	s = appendPayloadString(s, rec.AttemptID)
	s = append(s, `,"capture":"`+capture+`","execution_key":`...)
	if rec.ExecutionKey == nil {
		s = append(s, "null"...)
	} else {
		s = appendPayloadString(s, *rec.ExecutionKey)
	}
	s = append(s, `,"id":`...)
	s = appendPayloadString(s, rec.ID)
	s = append(s, `,"kind":`...)
	s = appendPayloadString(s, string(rec.Kind))
	s = append(s, `,"payload":`...)
	s = append(s, payload...)
	s = append(s, `,"recorded_at":`...)
	s = appendPayloadString(s, rec.RecordedAt)
	s = append(s, `,"run_id":`...)
	s = appendPayloadString(s, rec.RunID)
	s = append(s, `,"seq":`+strconv.FormatInt(rec.Seq, 10)+`,"session_id":`...)
	s = appendPayloadString(s, rec.SessionID)
	s = append(s, `,"step_id":`...)
	s = appendPayloadString(s, rec.StepID)
	s = append(s, `,"version":`+strconv.Itoa(rec.Version)+`}`...)
	out, err := journal.AppendCanonical(nil, s)
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// TestExportLineMatchesOracle checks that a line written field by field,
// with only the payload through the canonical encoder, is byte for byte
// the canonical form of the whole record, and fails where it fails.
func TestExportLineMatchesOracle(t *testing.T) {
	t.Parallel()
	key := "run-1:1:call\t1"
	payloads := []string{
		``, `null`, ` null `, `{}`, `[]`, `"s"`, `1.0`, `-0`, `1E400`, `{"a":1,"a":2}`, `{"a":`, `"\ud800"`,
		`{"api_key":"\ud800"}`, `{"b": "x\/y", "a\u0041": [1.0, "k\n\u00e9", {"c": null}]}`,
		`{"password":"p","z":[{"cookie":1}]}`, `{"s":"{\"token\":1,\"secret\":2}"}`, `{"s":"{\"x\":1}"}`,
		`{"text":"line\nbreak \"quoted\" tab\t é → \u2028 \u0001 </script>"}`,
		strings.Repeat("[", 9999) + strings.Repeat("]", 9999),
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	}
	fields := []string{"plain", "", "a\"b\\c\n\x00\x1f\x7f", "é→日本\U0001F600", "bad\xff", "\xed\xa0\x80"}
	policies := [][]Rule{nil, {{Pattern: "quoted", Replace: "q"}}, {{Pointer: "/a", Action: "replace", Value: json.RawMessage(`{"b":2,"a":1}`)}}}
	for _, rules := range policies {
		compiled, err := Policy{IncludePayloads: true, Redact: rules}.compile()
		require.NoError(t, err)
		for _, include := range []bool{true, false} {
			enc := &exportRecordEncoder{include: include, rules: compiled}
			for i, payload := range payloads {
				for j, field := range fields {
					rec := journal.Record{Version: 1, ID: "id-" + field, Kind: journal.KindToolReturned,
						RecordedAt: "2025-03-04T05:06:07.891000+00:00", SessionID: "sess", RunID: "run-1",
						StepID: "1", AttemptID: field, Payload: []byte(payload), Seq: int64(i*10 + j + 1)}
					if j%2 == 0 {
						rec.ExecutionKey = &key
					}
					want, wantErr := exLineOracle(enc, rec)
					got, gotErr := enc.appendLine([]byte("prefix"), rec)
					if wantErr != nil {
						require.Error(t, gotErr, "payload %.40q field %q", payload, field)
						require.Equal(t, "prefix", string(got))
						continue
					}
					require.NoError(t, gotErr, "payload %.40q field %q", payload, field)
					require.Equal(t, "prefix"+string(want), string(got), "payload %.40q field %q", payload, field)
				}
			}
		}
	}
}

// TestExportLineRefusesSplicedPayload checks that a stored payload must be
// one JSON value on its own: text that would only parse spliced into the
// record (adding or overriding fields) fails the export.
func TestExportLineRefusesSplicedPayload(t *testing.T) {
	t.Parallel()
	enc := &exportRecordEncoder{include: true}
	for _, payload := range []string{`1,"seq":7`, `{},"zz":1`, `null,"version":2`, `1 2`, `"a","b"`} {
		rec := journal.Record{Version: 1, ID: "id", Kind: journal.KindToolReturned, RecordedAt: "t",
			SessionID: "s", RunID: "r", StepID: "1", AttemptID: "1", Payload: []byte(payload), Seq: 1}
		out, err := enc.appendLine(nil, rec)
		require.Error(t, err, "payload %s gave %s", payload, out)
	}
}

// TestUnquoteTrailingHighSurrogate: a high surrogate escape that ends a
// string used to slice past the end (a panic in the export's worker).
func TestUnquoteTrailingHighSurrogate(t *testing.T) {
	t.Parallel()
	for _, lit := range []string{`"\ud800"`, `"x\udbff"`, `"\ud800\u"`, `"\ud800\"`} {
		require.NotPanics(t, func() { _, _ = unquotePayloadString([]byte(lit)) }, lit)
	}
	s, err := unquotePayloadString([]byte(`"\ud800"`))
	require.NoError(t, err)
	require.Equal(t, "\uFFFD", s)
	require.NotPanics(t, func() { mightRedact([]byte(`{"s":"\ud800"}`), 0) })
}

func TestAutoRedactJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, want string
		fails          bool
	}{
		{name: "nothing to redact is kept verbatim", in: `{"b": 1, "a": "x"}`, want: `{"b": 1, "a": "x"}`},
		{name: "credential key", in: `{"user":"bob","api_key":"sk-live-1"}`, want: `{"api_key":"[REDACTED]","user":"bob"}`},
		{name: "nested in arrays", in: `[{"Password":{"x":1}}]`, want: `[{"Password":"[REDACTED]"}]`},
		{name: "JSON held in a string", in: `{"arguments":"{\"client_secret\":\"s\"}"}`, want: `{"arguments":"{\"client_secret\":\"[REDACTED]\"}"}`},
		{name: "unlisted key", in: `{"token":"t"}`, want: `{"token":"t"}`},
		{name: "invalid document that may hold a credential", in: `{"password":`, fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := AutoRedactJSON([]byte(tc.in))
			if tc.fails {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
		})
	}
}
