package tool

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/model"
)

// newBuiltin returns the named builtin as a tool.
func newBuiltin(t *testing.T, name string, opts Options) Tool {
	t.Helper()
	tl, err := New(Config{Name: name}, opts)
	require.NoError(t, err)
	return tl
}

// invocation returns an invocation of call id "c1" with input.
func invocation(name, input string) Invocation {
	return Invocation{
		SessionID: "s1", RunID: "r1", ExecutionKey: "r1:1:c1", Attempt: 1,
		Call: model.ToolCall{ID: "c1", Name: name, Input: json.RawMessage(input)},
	}
}

func TestEcho(t *testing.T) {
	t.Parallel()
	tl := newBuiltin(t, "echo", Options{})
	tests := []struct {
		name  string
		input string
		want  string
	}{
		{name: "text", input: `{"text":"hi <there>"}`, want: `"hi <there>"`},
		{name: "no text", input: `{"n":1}`, want: `{"n":1}`},
		{name: "text not a string", input: `{"text":1}`, want: `{"text":1}`},
		{name: "empty", input: ``, want: `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := tl.Call(t.Context(), invocation("echo", tt.input))
			require.NoError(t, err)
			require.Equal(t, model.ToolResult{ToolCallID: "c1", Content: json.RawMessage(tt.want)}, out.Result)
		})
	}
}

func TestSleep(t *testing.T) {
	t.Parallel()

	t.Run("sleeps", func(t *testing.T) {
		t.Parallel()
		tl := newBuiltin(t, "sleep", Options{})
		out, err := tl.Call(t.Context(), invocation("sleep", `{"seconds":0.01}`))
		require.NoError(t, err)
		require.Equal(t, `"slept 0.01 seconds"`, string(out.Result.Content))
		require.False(t, out.Result.IsError)
	})

	t.Run("bad input", func(t *testing.T) {
		t.Parallel()
		tl := newBuiltin(t, "sleep", Options{})
		out, err := tl.Call(t.Context(), invocation("sleep", `{"seconds":-1}`))
		require.NoError(t, err)
		require.True(t, out.Result.IsError)
	})

	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		tl := newBuiltin(t, "sleep", Options{})
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(10*time.Millisecond, cancel)
		start := time.Now()
		_, err := tl.Call(ctx, invocation("sleep", `{"seconds":60}`))
		require.Less(t, time.Since(start), 10*time.Second)
		require.ErrorIs(t, err, context.Canceled)
		f := AsFailure(err)
		require.Equal(t, "CancelledError", f.Type)
		require.False(t, f.Transient)
	})

	t.Run("tool timeout", func(t *testing.T) {
		t.Parallel()
		tl, err := New(Config{Name: "sleep", TimeoutSeconds: 0.01}, Options{})
		require.NoError(t, err)
		_, err = tl.Call(t.Context(), invocation("sleep", `{"seconds":60}`))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		f := AsFailure(err)
		require.Equal(t, "TimeoutError", f.Type)
		require.True(t, f.Transient)
	})
}

func TestOverdueBalance(t *testing.T) {
	t.Parallel()
	tl := newBuiltin(t, "overdue_balance", Options{})
	tests := []struct {
		name    string
		input   string
		want    string // the JSON text inside the string content
		isError bool
	}{
		{name: "demo", input: `{"account":"demo"}`, want: `{"account": "demo", "overdue_balance": 1500, "invoices": ["inv-1", "inv-2"]}`},
		{name: "python escaping", input: `{"account":"é \"q\" <a>\n😀"}`, want: `{"account": "\u00e9 \"q\" <a>\n\ud83d\ude00", "overdue_balance": 1500, "invoices": ["inv-1", "inv-2"]}`},
		{name: "missing account", input: `{}`, want: `overdue_balance needs input {"account": <string>}`, isError: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := tl.Call(t.Context(), invocation("overdue_balance", tt.input))
			require.NoError(t, err)
			require.Equal(t, tt.isError, out.Result.IsError)
			var s string
			require.NoError(t, json.Unmarshal(out.Result.Content, &s), "content is a JSON string")
			require.Equal(t, tt.want, s)
			if !tt.isError {
				require.True(t, json.Valid([]byte(s)))
			}
		})
	}
}

func TestWriteReport(t *testing.T) {
	t.Parallel()

	t.Run("exclusive", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		tl := newBuiltin(t, "write_report", Options{WorkDir: dir})
		out, err := tl.Call(t.Context(), invocation("write_report", `{}`))
		require.NoError(t, err)
		require.Equal(t, model.ToolResult{ToolCallID: "c1", Content: TextContent("Report created: 12 orders, $1,200 revenue.")}, out.Result)

		report, err := os.ReadFile(filepath.Join(dir, "report.txt"))
		require.NoError(t, err)
		require.Equal(t, "Weekly sales report\nOrders: 12\nRevenue: $1,200\n", string(report))
		if runtime.GOOS != "windows" {
			st, err := os.Stat(filepath.Join(dir, "report.txt"))
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
		}

		_, err = tl.Call(t.Context(), invocation("write_report", `{}`))
		require.Error(t, err)
		f := AsFailure(err)
		require.Equal(t, "FileExistsError", f.Type)
		require.False(t, f.Transient)
		require.ErrorIs(t, err, os.ErrExist)

		log, err := os.ReadFile(filepath.Join(dir, "tool-invocations.txt"))
		require.NoError(t, err)
		require.Equal(t, "write_report\nwrite_report\n", string(log))
		report2, err := os.ReadFile(filepath.Join(dir, "report.txt"))
		require.NoError(t, err)
		require.Equal(t, report, report2)
	})

	t.Run("concurrent calls create one report", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		tl := newBuiltin(t, "write_report", Options{WorkDir: dir})
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() { _, errs[i] = tl.Call(t.Context(), invocation("write_report", `{}`)) })
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
			}
		}
		require.Equal(t, 1, ok)
	})

	t.Run("not configured", func(t *testing.T) {
		t.Parallel()
		tl := newBuiltin(t, "write_report", Options{})
		out, err := tl.Call(t.Context(), invocation("write_report", `{}`))
		require.NoError(t, err)
		require.True(t, out.Result.IsError)
		require.Contains(t, string(out.Result.Content), "not configured")
	})
}

func TestClientTool(t *testing.T) {
	t.Parallel()
	tl, err := New(Config{Name: "ask_user", Kind: KindClient}, Options{})
	require.NoError(t, err)
	_, err = tl.Call(t.Context(), invocation("ask_user", `{}`))
	require.ErrorIs(t, err, ErrClientResult)
}

func TestCustomBuiltinOverridesStandard(t *testing.T) {
	t.Parallel()
	fn := func(_ context.Context, inv Invocation) (Outcome, error) {
		return Outcome{Result: model.ToolResult{Content: TextContent("custom")}}, nil
	}
	tl := newBuiltin(t, "echo", Options{Builtins: map[string]BuiltinFunc{"echo": fn}})
	out, err := tl.Call(t.Context(), invocation("echo", `{"text":"x"}`))
	require.NoError(t, err)
	require.Equal(t, "c1", out.Result.ToolCallID, "the call id is filled in")
	require.Equal(t, `"custom"`, string(out.Result.Content))
}
