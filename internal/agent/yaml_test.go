package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// scriptInput is minimal with the scripted tool call's input (line 7)
// replaced.
func scriptInput(input string) string {
	return strings.Replace(minimal, "input: {text: hi}", "input: "+input, 1)
}

// TestLoadYAML12 reads plain scalars by the YAML 1.2 core schema where
// YAML 1.1 (sigs.k8s.io/yaml) or yaml.v3's own resolver differ: the value
// of v in a free-form input, as JSON.
func TestLoadYAML12(t *testing.T) {
	t.Parallel()
	tests := []struct{ yaml, json string }{
		// YAML 1.1 booleans are strings.
		{"n", `"n"`}, {"y", `"y"`}, {"N", `"N"`}, {"Y", `"Y"`}, {"yes", `"yes"`}, {"no", `"no"`}, {"Yes", `"Yes"`},
		{"NO", `"NO"`}, {"on", `"on"`}, {"off", `"off"`}, {"On", `"On"`}, {"OFF", `"OFF"`},
		{"true", `true`}, {"True", `true`}, {"TRUE", `true`}, {"false", `false`}, {"False", `false`}, {"FALSE", `false`},
		{"tRUE", `"tRUE"`},
		// Integers: decimal even with a leading 0; 0o octal and 0x hex.
		{"0755", `755`}, {"-0755", `-755`}, {"+12", `12`}, {"0", `0`}, {"-0", `0`}, {"08", `8`}, {"0o755", `493`}, {"0x1F", `31`},
		{"123456789012345678901234567890", `123456789012345678901234567890`},
		{"0b101", `"0b101"`}, {"1_000", `"1_000"`}, {"0o8", `"0o8"`}, {"0X1F", `"0X1F"`},
		// Sexagesimal numbers and timestamps are YAML 1.1 only.
		{"1:20", `"1:20"`}, {"190:20:30", `"190:20:30"`}, {"2001-12-14", `"2001-12-14"`},
		{"2001-12-14t21:59:43.10-05:00", `"2001-12-14t21:59:43.10-05:00"`},
		// Floats, written as JSON numbers.
		{"1.5", `1.5`}, {".5", `0.5`}, {"-.5e3", `-0.5e3`}, {"1.", `1.0`}, {"+1e3", `1e3`}, {"007.25", `7.25`}, {"1E-2", `1E-2`},
		{"1.5.5", `"1.5.5"`}, {"1e", `"1e"`}, {"e3", `"e3"`},
		// Null.
		{"~", `null`}, {"null", `null`}, {"Null", `null`}, {"NULL", `null`}, {"", `null`}, {"nULL", `"nULL"`},
		// Quoted, block and explicitly tagged scalars.
		{"'0755'", `"0755"`}, {`"yes"`, `"yes"`}, {"!!str 0755", `"0755"`}, {"!!str true", `"true"`},
		{"!!int 0755", `755`}, {"!!float 1", `1`}, {"!!bool TRUE", `true`}, {"!!null ~", `null`},
		{"[n, y, ~, 010, 1:20]", `["n","y",null,10,"1:20"]`}, {"{on: off, 0755: ~}", `{"on":"off","0755":null}`},
		// Merge keys are YAML 1.1: "<<" is a plain key.
		{"{<<: {a: 1}}", `{"<<":{"a":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.yaml, func(t *testing.T) {
			t.Parallel()
			d, err := Load(strings.NewReader(scriptInput("{v: "+tt.yaml+"}")), "agents/y.yaml")
			require.NoError(t, err)
			require.JSONEq(t, `{"v":`+tt.json+`}`, string(d.Model.Script[0].ToolCalls[0].Input))
		})
	}
}

// TestLoadYAML12Fields: typed fields take the YAML 1.2 reading too, and
// the schema of issue 18 (required: [n]) loads; under YAML 1.1 it read
// as [false] and the agent failed to load.
func TestLoadYAML12Fields(t *testing.T) {
	t.Parallel()
	file := strings.Replace(minimal, "- name: echo", `- name: echo
    description: no
    input_schema: {type: object, properties: {n: {type: string}, y: {type: string}}, required: [n, y]}`, 1)
	file = strings.Replace(file, "name: a\n", "name: y\n", 1)
	file += "system_prompt: off\nmax_iterations: 0755\nmax_result_chars: 010\n"
	d, err := Load(strings.NewReader(file), "agents/y.yaml")
	require.NoError(t, err)
	require.Equal(t, "y", d.Name)
	require.Equal(t, "off", d.SystemPrompt)
	require.Equal(t, 755, d.MaxIterations)
	require.Equal(t, 10, d.MaxResultChars)
	require.Equal(t, "no", d.Tools[0].Description)
	require.JSONEq(t, `{"type":"object","properties":{"n":{"type":"string"},"y":{"type":"string"}},"required":["n","y"]}`,
		string(d.Tools[0].InputSchema))
}

// TestLoadYAMLStrict: repeated keys anywhere, unknown keys, tags, values
// JSON cannot hold and self-referencing aliases are refused, naming the
// file and the line, never the value.
func TestLoadYAMLStrict(t *testing.T) {
	t.Parallel()
	const secret = "sk-pr0j-S3cretKey"
	tests := []struct {
		name string
		file string
		want string // the whole problem line after "agents/bad.yaml: "
	}{
		{name: "top-level key twice", file: minimal + "name: a\n", want: `invalid YAML: line 11: key "name" already set in map`},
		{name: "nested key twice", file: strings.Replace(minimal, "provider: scripted", "provider: scripted\n  provider: openai", 1),
			want: `invalid YAML: line 6: key "provider" already set in map`},
		{name: "key twice in a flow mapping", file: scriptInput("{text: hi, text: " + secret + "}"),
			want: `invalid YAML: line 7: key "text" already set in map`},
		{name: "key twice in a free-form schema", file: strings.Replace(minimal, "- name: echo", "- name: echo\n    input_schema:\n      type: object\n      type: object", 1),
			want: `invalid YAML: line 13: key "type" already set in map`},
		{name: "quoted and plain key", file: minimal + `"name": b` + "\n", want: `invalid YAML: line 11: key "name" already set in map`},
		{name: "key twice through an alias", file: "k: &k name\nname: a\n*k : b\n", want: `invalid YAML: line 3: key "name" already set in map`},
		{name: "unknown key", file: minimal + "max_iteration: 3\n", want: "max_iteration: unknown field"},
		{name: "unknown nested key", file: strings.Replace(minimal, "provider: scripted", "provider: scripted\n  temprature: 1", 1),
			want: "model.temprature: unknown field"},
		{name: "merge key is not a merge", file: "name: a\nversion: v1\nmodel: &m {provider: openai, model: m}\n<<: {model: *m}\n",
			want: "<<: unknown field"},
		{name: "infinity", file: minimal + "max_session_duration_seconds: .inf\n",
			want: "invalid YAML: line 11: infinity and NaN cannot be written in JSON; use a finite number"},
		{name: "NaN", file: scriptInput("{v: .NaN}"), want: "invalid YAML: line 7: infinity and NaN cannot be written in JSON; use a finite number"},
		{name: "float overflow", file: scriptInput("{v: 1e999}"), want: "invalid YAML: line 7: number out of the range of a 64-bit float"},
		{name: "custom tag", file: minimal + "system_prompt: !secret " + secret + "\n", want: `invalid YAML: line 11: tag "!secret" is not supported here`},
		{name: "binary tag", file: scriptInput("{v: !!binary aGk=}"), want: `invalid YAML: line 7: tag "!!binary" is not supported here`},
		{name: "tag of another type", file: scriptInput("{v: !!int " + secret + "}"), want: "invalid YAML: line 7: the value is not of its tag's type !!int"},
		{name: "set tag", file: scriptInput("!!set {a, b}"), want: `invalid YAML: line 7: tag "!!set" is not supported here`},
		{name: "mapping as a key", file: scriptInput("{? {a: 1} : x}"), want: "invalid YAML: line 7: a mapping key must be a scalar"},
		{name: "alias of its own node", file: scriptInput("&a [*a]"), want: "invalid YAML: line 7: alias *a refers to a node that contains it"},
		{name: "syntax error beside a secret", file: "name: a\nmodel: {api_key_env: " + secret + ": x}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load(strings.NewReader(tt.file), "agents/bad.yaml")
			require.ErrorIs(t, err, ErrInvalidDefinition)
			lines := strings.Split(err.Error(), "\n")
			for _, l := range lines {
				require.True(t, strings.HasPrefix(l, "agents/bad.yaml: "), "every problem names the file: %q", l)
			}
			if tt.want != "" {
				require.Contains(t, lines, "agents/bad.yaml: "+tt.want)
			} else {
				require.Contains(t, err.Error(), "agents/bad.yaml: invalid YAML: line ") // where go-yaml says
			}
			require.NotContains(t, err.Error(), "S3cret", "no value echoed")
		})
	}
}

// TestLoadYAMLAliases: anchors and aliases work, but an expansion cannot
// grow without bound.
func TestLoadYAMLAliases(t *testing.T) {
	t.Parallel()
	file := strings.Replace(minimal, "  - name: echo\n", `  - name: echo
    retry: &r {attempts: 2, backoff_seconds: 0, max_backoff_seconds: 0}
  - name: sleep
    retry: *r
`, 1)
	d, err := Load(strings.NewReader(file), "agents/a.yaml")
	require.NoError(t, err)
	require.Equal(t, d.Tools[0].Retry, d.Tools[1].Retry)
	require.Equal(t, 2, d.Tools[1].Retry.Attempts)

	var laughs strings.Builder
	laughs.WriteString("a0: &a0 [\"" + strings.Repeat("x", 64) + "\"]\n")
	for i := 1; i < 40; i++ {
		fmt.Fprintf(&laughs, "a%d: &a%d [*a%d, *a%d, *a%d, *a%d]\n", i, i, i-1, i-1, i-1, i-1)
	}
	_, err = Load(strings.NewReader(laughs.String()), "agents/laughs.yaml")
	require.ErrorIs(t, err, ErrInvalidDefinition)
	require.Contains(t, err.Error(), "agents/laughs.yaml: invalid YAML: line ")
	require.Contains(t, err.Error(), "through aliases")
}

// TestLoadJSON: JSON is YAML 1.2, including the escapes YAML spells
// differently (\/ and surrogate pairs) and tabs, with the same
// strictness.
func TestLoadJSON(t *testing.T) {
	t.Parallel()
	file := "{\n\t\"name\": \"j\",\n\t\"version\": \"v1\",\n" +
		`	"system_prompt": "a\/b \u00e9 \ud83d\ude00 \ud800 \\u0041 \"q\" \t",` + "\n" +
		"\t\"max_iterations\": 7,\n" +
		"\t\"model\": {\"provider\": \"openai\", \"model\": \"m\", \"temperature\": 1e-1},\n" +
		"\t\"tools\": [{\"name\": \"ask\", \"kind\": \"client\", \"input_schema\": {\"type\": \"object\", \"required\": [\"n\"]}}]\n}\n"
	require.True(t, json.Valid([]byte(file)))
	d, err := Load(strings.NewReader(file), "agents/j.json")
	require.NoError(t, err)
	var want struct {
		SystemPrompt string `json:"system_prompt"`
	}
	require.NoError(t, json.Unmarshal([]byte(file), &want))
	require.Equal(t, want.SystemPrompt, d.SystemPrompt, "what encoding/json reads")
	require.Equal(t, "a/b é 😀 \ufffd \\u0041 \"q\" \t", d.SystemPrompt)
	require.Equal(t, 7, d.MaxIterations)
	require.NotNil(t, d.Model.Temperature)
	require.InDelta(t, 0.1, *d.Model.Temperature, 1e-12)
	require.JSONEq(t, `{"type":"object","required":["n"]}`, string(d.Tools[0].InputSchema))

	for _, tt := range []struct{ file, want string }{
		{`{"name":"j","version":"v1","name":"k","model":{"provider":"openai","model":"m"}}`, `invalid YAML: line 1: key "name" already set in map`},
		{"{\"name\":\"j\",\"version\":\"v1\",\n\"model\":{\"provider\":\"openai\",\"model\":\"m\",\n\"model\":\"n\"}}",
			`invalid YAML: line 3: key "model" already set in map`},
		{`{"name":"j","version":"v1","Model":{"provider":"openai","model":"m"}}`, "Model: unknown field"},
		{`{"name":"j","version":"v1","model":{"provider":"openai","model":"m"},"tools":[{"name":"t","kind":"client","extra":1}]}`,
			"tools[0].extra: unknown field"},
	} {
		_, err := Load(strings.NewReader(tt.file), "agents/j.json")
		require.ErrorIs(t, err, ErrInvalidDefinition, tt.file)
		require.Contains(t, strings.Split(err.Error(), "\n"), "agents/j.json: "+tt.want, tt.file)
	}
}

func TestJSONForYAML(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{`{"a":"b"}`, `{"a":"b"}`},
		{`["\/", "\\/", "\\\/"]`, `["/", "\\/", "\\/"]`},
		{`["\u00e9\uD83D\uDE00", "\ud800x", "\udc00\ud800", "\\u0041", "\ud83d\u0041"]`,
			`["\u00e9\U0001f600", "\ufffdx", "\ufffd\ufffd", "\\u0041", "\ufffd\u0041"]`},
		{"{\n\t\"k\\/\": 1}", "{\n\t\"k/\": 1}"},
	} {
		require.True(t, json.Valid([]byte(tt.in)), tt.in)
		require.Equal(t, tt.want, string(jsonForYAML([]byte(tt.in))), tt.in)
	}
}
