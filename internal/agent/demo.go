package agent

import (
	"embed"
	"io/fs"
	"path"
)

// Refs of the demo agents (DESIGN §9, REFERENCE §10, and the README's
// approvals walkthrough).
var (
	// DemoInvoiceAnalyst is the flight-recorder demo agent.
	DemoInvoiceAnalyst = Ref{Name: "invoice-analyst", Version: "v1"}
	// DemoCrashRecovery is the crash-recovery demo agent.
	DemoCrashRecovery = Ref{Name: "crash-recovery", Version: "v1"}
	// DemoInvoiceReminder is the approvals demo agent: its one tool,
	// send_reminder (the echo builtin), has permission ask.
	DemoInvoiceReminder = Ref{Name: "invoice-reminder", Version: "v1"}
)

// demoFiles holds the demo agent files.
//
//go:embed demo/*.yaml
var demoFiles embed.FS

// Demo returns fresh copies of the demo agents, loaded from the embedded
// demo/*.yaml files and sorted by name. They use the builtins
// overdue_balance, write_report and echo of package tool.
func Demo() []*Definition {
	names, err := fs.Glob(demoFiles, "demo/*.yaml")
	if err != nil {
		panic("agent: demo files: " + err.Error())
	}
	defs := make([]*Definition, 0, len(names))
	for _, name := range names {
		f, err := demoFiles.Open(name)
		if err != nil {
			panic("agent: demo files: " + err.Error())
		}
		d, err := Load(f, path.Join("internal/agent", name))
		_ = f.Close()
		if err != nil {
			panic("agent: demo files: " + err.Error()) // covered by TestDemo
		}
		defs = append(defs, d)
	}
	return defs
}
