package agent

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/model"
	"hxd/internal/tool"
)

func TestDemo(t *testing.T) {
	t.Parallel()
	defs := Demo()
	require.Len(t, defs, 3)
	reg := NewRegistry()
	for _, d := range defs {
		require.NoError(t, d.Validate())
		require.NoError(t, reg.Register(d))
		for _, td := range d.Tools {
			_, err := tool.New(td.Config, tool.Options{})
			require.NoError(t, err, "demo tool %s builds", td.Name)
		}
	}

	inv, err := reg.Get(DemoInvoiceAnalyst)
	require.NoError(t, err)
	require.Equal(t, model.ProviderScripted, inv.Model.Provider)
	require.Len(t, inv.Model.Script, 2)
	require.Equal(t, 1, inv.Model.Script[0].FailAttempts)
	require.Equal(t, []model.ToolCall{{ID: "overdue", Name: "overdue_balance", Input: json.RawMessage(`{"account":"demo"}`)}}, inv.Model.Script[0].ToolCalls)
	require.Equal(t, "Overdue balance: $1,500.", inv.Model.Script[1].Text)
	require.Equal(t, "Overdue balance: $1,500. (synthetic fixture)", ApplyAll(inv.ResponseMiddleware, inv.Model.Script[1].Text))
	ob, ok := inv.Tool("overdue_balance")
	require.True(t, ok)
	require.Equal(t, tool.KindBuiltin, ob.Kind)
	require.Equal(t, "overdue_balance", ob.Builtin)
	require.Equal(t, tool.PolicySafe, ob.ReplayPolicy)
	require.Equal(t, tool.PermissionAllow, ob.Permission)
	require.Equal(t, "Calculate the unpaid balance of synthetic overdue invoices.", ob.Description)
	require.JSONEq(t, `{"type":"object","properties":{"account":{"type":"string"}},"required":["account"]}`, string(ob.InputSchema))

	cr, err := reg.Get(DemoCrashRecovery)
	require.NoError(t, err)
	require.Len(t, cr.Model.Script, 2)
	require.Equal(t, []model.ToolCall{{ID: "report", Name: "write_report", Input: json.RawMessage(`{}`)}}, cr.Model.Script[0].ToolCalls)
	require.Equal(t, "The weekly report is ready: 12 orders, $1,200 revenue.", cr.Model.Script[1].Text)
	require.Empty(t, cr.ResponseMiddleware)
	wr, ok := cr.Tool("write_report")
	require.True(t, ok)
	require.Equal(t, tool.PolicyManual, wr.ReplayPolicy)
	require.Equal(t, tool.PermissionAllow, wr.Permission)

	rem, err := reg.Get(DemoInvoiceReminder)
	require.NoError(t, err)
	require.Len(t, rem.Model.Script, 2)
	require.Equal(t, []model.ToolCall{{ID: "remind", Name: "send_reminder", Input: json.RawMessage(
		`{"account":"demo","text":"Reminder for account demo: invoices inv-1 and inv-2 ($1,500) are overdue."}`)}}, rem.Model.Script[0].ToolCalls)
	require.Equal(t, "I asked to send the demo account a reminder of its $1,500 overdue balance.", rem.Model.Script[1].Text)
	sr, ok := rem.Tool("send_reminder")
	require.True(t, ok)
	require.Equal(t, tool.KindBuiltin, sr.Kind)
	require.Equal(t, tool.BuiltinEcho, sr.Builtin)
	require.Equal(t, tool.PermissionAsk, sr.Permission, "the approvals demo needs an approval")
	require.Equal(t, tool.PolicyIdempotent, sr.ReplayPolicy)

	require.NotSame(t, Demo()[0], Demo()[0], "fresh copies")
}
