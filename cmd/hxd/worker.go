package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"time"

	"hxd/internal/mcp"
	"hxd/internal/temporal"
	"hxd/internal/tool"
)

// workerConfig is everything `hxd worker` reads from flags and HXD_* env.
type workerConfig struct {
	Temporal temporalConfig
	// AgentsDir holds agent files. Default: none.
	AgentsDir string
	// Demo registers the demo agents. Default: false.
	Demo bool
	// LogFormat is text or json. Default: text.
	LogFormat string
	// WorkDir is where demo tools write files. Default: the current folder.
	WorkDir string
	// Debug is --debug-addr (debug.go).
	Debug debugConfig
	// OTel and OTelCaptureContent are --otel and --otel-capture-content,
	// as for serve (otel.go).
	OTel, OTelCaptureContent bool
}

func parseWorkerFlags(args []string, e env) (*workerConfig, error) {
	c := &workerConfig{}
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	ef := newEnvFlags(fs, e)
	c.Temporal.register(fs, ef)
	fs.StringVar(&c.AgentsDir, "agents", "", "folder of agent YAML files (HXD_AGENTS)")
	ef.bind("agents", "HXD_AGENTS")
	fs.BoolVar(&c.Demo, "demo", false, "register the demo agents (HXD_DEMO)")
	ef.bind("demo", "HXD_DEMO")
	fs.StringVar(&c.LogFormat, "log-format", "text", "log format: text or json (HXD_LOG_FORMAT)")
	ef.bind("log-format", "HXD_LOG_FORMAT")
	fs.StringVar(&c.WorkDir, "workdir", ".", "folder where demo tools write files (HXD_WORKDIR)")
	ef.bind("workdir", "HXD_WORKDIR")
	c.Debug.register(fs, ef)
	registerOTel(fs, ef, &c.OTel, &c.OTelCaptureContent)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, &exitError{code: 0}
		}
		return nil, &exitError{code: 2, err: err}
	}
	if fs.NArg() > 0 {
		return nil, &exitError{code: 2, err: fmt.Errorf("worker takes no arguments, got %q", fs.Args())}
	}
	if _, err := ef.apply(); err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	errs := c.Temporal.validate()
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("--log-format must be text or json, not %q", c.LogFormat))
	}
	if err := c.Debug.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	return c, nil
}

// worker is `hxd worker`: a Temporal worker polling the task queue for
// session workflows and their model/tool activities, with the agents of
// --agents/--demo. Any number of workers may poll one task queue; a killed
// worker's workflow tasks and activities are retried by the others.
func worker(ctx context.Context, args []string, e env) error {
	cfg, err := parseWorkerFlags(args, e)
	if err != nil {
		return err
	}
	log := newLogger(cfg.LogFormat, e)
	// Spans still queued are flushed last, once the worker stopped.
	tel, log, stopOTel, err := setupOTel(ctx, cfg.OTel, log)
	if err != nil {
		return err
	}
	defer stopOTel()
	if tel.Enabled() {
		// The client's interceptor traces this worker's workflows and
		// activities.
		cfg.Temporal.tracerProvider = tel.TracerProvider()
	}
	// Before connecting to anything: a worker calls the models, so an
	// agent whose key variable is unset is refused here.
	registry, nAgents, err := loadAgents(cfg.Demo, cfg.AgentsDir, e.lookupEnv)
	if err != nil {
		return err
	}
	dbg, err := startDebug(ctx, cfg.Debug, log, e.onDebugListen)
	if err != nil {
		return err
	}
	defer dbg.close()
	deps, err := dialTemporal(ctx, &cfg.Temporal, log)
	if err != nil {
		return err
	}
	defer deps.close()
	wd := temporal.WorkerDeps{
		Agents:      registry,
		ToolOptions: tool.Options{HTTPClient: &http.Client{}, WorkDir: cfg.WorkDir},
		Logger:      log,
		Artifacts:   deps.store,
		// The worker closes it when it stops (children waited for).
		MCP: mcp.NewManager(mcp.Options{Logger: log, LookupEnvFunc: e.lookupEnv}),
	}
	wd.ModelOptions.LookupEnvFunc = e.lookupEnv
	// The model and tool activities make chat and execute_tool spans under
	// --otel, with payloads only with --otel-capture-content.
	if tel.Enabled() {
		wd.TracerProvider, wd.CaptureContent = tel.TracerProvider(), cfg.OTelCaptureContent
	}
	if deps.events != nil {
		wd.Events = deps.events
	}
	w := temporal.NewWorker(deps.client, cfg.Temporal.TaskQueue, wd)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	log.InfoContext(ctx, "hxd worker polling", "temporal", cfg.Temporal.Address, "namespace", cfg.Temporal.Namespace,
		"task_queue", cfg.Temporal.TaskQueue, "agents", nAgents, "version", version)
	<-ctx.Done()
	log.Info("worker stopping")
	stopped := make(chan struct{})
	go func() { w.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		log.Warn("worker stop timed out")
	}
	return nil
}
