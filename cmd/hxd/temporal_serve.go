package main

import (
	"context"
	"log/slog"
	"net"
	"time"

	"hxd/internal/agent"
	hxhttp "hxd/internal/http"
	"hxd/internal/mcp"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/temporal"
)

// serveTemporal is `hxd serve --engine temporal`: the HTTP API over the
// Temporal engine. No SQL store is opened; sessions are workflows run by
// `hxd worker` processes on the same task queue.
func serveTemporal(ctx context.Context, cfg *serveConfig, ln net.Listener, e env, log *slog.Logger, auth hxhttp.Authenticator, registry *agent.Registry, nAgents int) error {
	tc := &cfg.Temporal
	deps, err := dialTemporal(ctx, tc, log)
	if err != nil {
		return err
	}
	defer deps.close()
	{
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := temporal.EnsureSearchAttributes(sctx, deps.client, tc.Namespace)
		cancel()
		if err != nil {
			// Listing sessions needs it; everything else works without.
			log.WarnContext(ctx, "search attribute "+temporal.OwnerSearchAttribute+" is not registered: listing sessions fails until it is", "error", err)
		}
	}
	index, err := temporal.NewS3RunIndex(deps.s3, tc.S3.Bucket, tc.S3.Prefix)
	if err != nil {
		return err
	}
	tombstones, err := temporal.NewS3Tombstones(deps.s3, tc.S3.Bucket, tc.S3.Prefix)
	if err != nil {
		return err
	}
	// Session creation lists the tools of agents' MCP servers here; the
	// workers call them. Closed (children waited for) at return.
	mcpm := mcp.NewManager(mcp.Options{Logger: log, LookupEnvFunc: e.lookupEnv})
	defer func() {
		if cerr := mcpm.Close(); cerr != nil {
			log.Warn("close MCP connections", "error", cerr)
		}
	}()
	ecfg := temporal.EngineConfig{
		Client: deps.client, TaskQueue: tc.TaskQueue, Agents: registry, Index: index, Logger: log, Artifacts: deps.store,
		Tombstones:    tombstones,
		RuntimeConfig: temporal.RuntimeConfig{MaxSessionDurationSeconds: cfg.MaxSessionDuration.Seconds()},
		MCP:           mcpm,
	}
	if deps.events != nil {
		ecfg.Events = deps.events
	}
	eng, err := temporal.NewEngine(ecfg)
	if err != nil {
		return err
	}

	gcm := newGCMetrics()
	api := newAPIServer(cfg, ln, eng, log, auth, gcm.collectors()...)
	// Retention: the sweeper retires finished sessions through their
	// workflows and deletes what they left (internal/temporal/retention.go).
	sweeper := &temporal.Retention{
		Client: deps.client, Namespace: tc.Namespace, Tombstones: tombstones, Index: index, Artifacts: deps.store,
	}
	if deps.events != nil {
		sweeper.Events = deps.events
	}
	bgCtx, stopBG := context.WithCancel(ctx)
	defer stopBG()
	opts := hxruntime.GCOptions{
		Agents: registry, Logger: log, RetainFinishedFor: cfg.RetainFinishedFor, TombstoneFor: cfg.TombstoneFor,
		AfterSessionFunc: gcCrashAfter(cfg.CrashAfter, log, e.exit),
	}
	runSweeper(bgCtx, cfg.GCInterval, func(ctx context.Context) (*hxruntime.GCReport, error) {
		return sweeper.Sweep(ctx, opts)
	}, gcm, log)
	api.serve(ctx, e, "temporal "+tc.Address+" "+tc.Namespace+"/"+tc.TaskQueue, nAgents)
	if err := api.wait(ctx); err != nil {
		return err
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	api.shutdown(sctx)
	return nil
}
