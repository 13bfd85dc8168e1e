package agent

import (
	"embed"
	"io/fs"
	"path"
)

// Refs of the two demo agents (DESIGN §9, REFERENCE §10).
var (
	// DemoInvoiceAnalyst is the flight-recorder demo agent.
	DemoInvoiceAnalyst = Ref{Name: "invoice-analyst", Version: "v1"}
	// DemoCrashRecovery is the crash-recovery demo agent.
	DemoCrashRecovery = Ref{Name: "crash-recovery", Version: "v1"}
)

// demoFiles holds the demo agent files.
//
//go:embed demo/*.yaml
var demoFiles embed.FS

// Demo returns fresh copies of the two demo agents, loaded from the
// embedded demo/*.yaml files and sorted by name. They use the builtins
// overdue_balance and write_report of package tool.
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
