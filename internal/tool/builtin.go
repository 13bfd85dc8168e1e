package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"hxd/internal/model"
)

// Standard builtin names.
const (
	BuiltinEcho           = "echo"
	BuiltinSleep          = "sleep"
	BuiltinOverdueBalance = "overdue_balance"
	BuiltinWriteReport    = "write_report"
)

// Demo fixtures (REFERENCE §10.2).
const (
	// ReportText is what write_report writes to report.txt.
	ReportText = "Weekly sales report\nOrders: 12\nRevenue: $1,200\n"
	// ReportResult is write_report's result text.
	ReportResult = "Report created: 12 orders, $1,200 revenue."
	// ReportFile and InvocationLogFile are the files write_report writes in
	// Options.WorkDir.
	ReportFile        = "report.txt"
	InvocationLogFile = "tool-invocations.txt"
)

// BuiltinNames returns the names of the standard builtins, sorted.
func BuiltinNames() []string {
	names := []string{BuiltinEcho, BuiltinSleep, BuiltinOverdueBalance, BuiltinWriteReport}
	slices.Sort(names)
	return names
}

// isStandardBuiltin reports whether name is a standard builtin.
func isStandardBuiltin(name string) bool { return slices.Contains(BuiltinNames(), name) }

// lookupBuiltin returns a resolver of builtin names: opts.Builtins first,
// then the standard builtins; nil when unknown.
func lookupBuiltin(opts Options) func(string) BuiltinFunc {
	return func(name string) BuiltinFunc {
		if fn, ok := opts.Builtins[name]; ok && fn != nil {
			return fn
		}
		switch name {
		case BuiltinEcho:
			return echo
		case BuiltinSleep:
			return sleep
		case BuiltinOverdueBalance:
			return overdueBalance
		case BuiltinWriteReport:
			return writeReport(opts.WorkDir)
		}
		return nil
	}
}

// builtinTool runs a Go function in process.
type builtinTool struct {
	base
	fn BuiltinFunc
}

// Call runs one attempt bounded by the tool's timeout. The result's
// tool_call_id is always the call's id.
func (t *builtinTool) Call(ctx context.Context, inv Invocation) (Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout())
	defer cancel()
	out, err := t.fn(ctx, inv)
	if err != nil {
		if f := callFailure(ctx, t.timeout(), err); f != nil {
			return Outcome{}, f
		}
		return Outcome{}, AsFailure(err)
	}
	out.Result.ToolCallID = inv.Call.ID
	if len(out.Result.Content) == 0 {
		out.Result.Content = TextContent("")
	}
	return out, nil
}

// echo returns its input: the "text" field when it is a string, else the
// input JSON itself.
func echo(_ context.Context, inv Invocation) (Outcome, error) {
	var in struct {
		Text *string `json:"text"`
	}
	if json.Unmarshal(inv.Call.Input, &in) == nil && in.Text != nil {
		return Outcome{Result: textResult(inv.Call.ID, *in.Text)}, nil
	}
	content := inv.Call.Input
	if len(content) == 0 {
		content = json.RawMessage(`{}`)
	}
	return Outcome{Result: model.ToolResult{ToolCallID: inv.Call.ID, Content: content}}, nil
}

// sleep waits {"seconds": n} or until ctx is done.
func sleep(ctx context.Context, inv Invocation) (Outcome, error) {
	var in struct {
		Seconds *float64 `json:"seconds"`
	}
	if err := json.Unmarshal(inv.Call.Input, &in); err != nil || in.Seconds == nil || *in.Seconds < 0 {
		return Outcome{Result: ErrorResult(inv.Call.ID, `sleep needs input {"seconds": <non-negative number>}`)}, nil
	}
	timer := time.NewTimer(time.Duration(*in.Seconds * float64(time.Second)))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return Outcome{}, ctx.Err()
	case <-timer.C:
	}
	return Outcome{Result: textResult(inv.Call.ID, "slept "+strconv.FormatFloat(*in.Seconds, 'f', -1, 64)+" seconds")}, nil
}

// invoice is one synthetic invoice of the overdue_balance demo tool.
type invoice struct {
	id      string
	amount  int
	overdue bool
}

// demoInvoices are the synthetic invoices of REFERENCE §10.1.
var demoInvoices = []invoice{
	{id: "inv-1", amount: 1000, overdue: true},
	{id: "inv-2", amount: 500, overdue: true},
	{id: "inv-3", amount: 750, overdue: false},
}

// overdueBalance sums the synthetic overdue invoices of {"account": s}. The
// content is a JSON string holding Python json.dumps output of
// {"account", "overdue_balance", "invoices"}, invoices being the ids of the
// overdue ones.
func overdueBalance(_ context.Context, inv Invocation) (Outcome, error) {
	var in struct {
		Account *string `json:"account"`
	}
	if err := json.Unmarshal(inv.Call.Input, &in); err != nil || in.Account == nil {
		return Outcome{Result: ErrorResult(inv.Call.ID, `overdue_balance needs input {"account": <string>}`)}, nil
	}
	total := 0
	var ids []string
	for _, i := range demoInvoices {
		if i.overdue {
			total += i.amount
			ids = append(ids, pyQuote(i.id))
		}
	}
	s := fmt.Sprintf(`{"account": %s, "overdue_balance": %d, "invoices": [%s]}`,
		pyQuote(*in.Account), total, strings.Join(ids, ", "))
	return Outcome{Result: textResult(inv.Call.ID, s)}, nil
}

// pyQuote quotes s like Python's json.dumps with ensure_ascii=True.
func pyQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r >= ' ' && r <= '~':
			b.WriteRune(r)
		case r > 0xFFFF:
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// writeReport returns the write_report builtin writing in dir: it appends
// "write_report\n" to the invocation log, then creates the report file
// exclusively, so a second execution fails with FileExistsError.
func writeReport(dir string) BuiltinFunc {
	return func(_ context.Context, inv Invocation) (Outcome, error) {
		if dir == "" {
			return Outcome{Result: ErrorResult(inv.Call.ID, "write_report is not configured: no work directory")}, nil
		}
		log, err := os.OpenFile(filepath.Join(dir, InvocationLogFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return Outcome{}, &Failure{Type: "OSError", Message: "cannot open the invocation log", Cause: err}
		}
		_, err = log.WriteString(BuiltinWriteReport + "\n")
		if cerr := log.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return Outcome{}, &Failure{Type: "OSError", Message: "cannot write the invocation log", Cause: err}
		}
		f, err := os.OpenFile(filepath.Join(dir, ReportFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			return Outcome{}, &Failure{Type: "FileExistsError", Message: ReportFile + " already exists", Cause: err}
		}
		if err != nil {
			return Outcome{}, &Failure{Type: "OSError", Message: "cannot create " + ReportFile, Cause: err}
		}
		_, err = f.WriteString(ReportText)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return Outcome{}, &Failure{Type: "OSError", Message: "cannot write " + ReportFile, Cause: err}
		}
		return Outcome{Result: textResult(inv.Call.ID, ReportResult)}, nil
	}
}
