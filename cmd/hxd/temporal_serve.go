package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"hxd/internal/agent"
	hxhttp "hxd/internal/http"
	"hxd/internal/temporal"
)

// serveTemporal is `hxd serve --engine temporal`: the HTTP API over the
// Temporal engine. No SQL store is opened; sessions are workflows run by
// `hxd worker` processes on the same task queue.
func serveTemporal(ctx context.Context, cfg *serveConfig, e env, log *slog.Logger, auth hxhttp.Authenticator, registry *agent.Registry, nAgents int) error {
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
	ecfg := temporal.EngineConfig{
		Client: deps.client, TaskQueue: tc.TaskQueue, Agents: registry, Index: index, Logger: log, Artifacts: deps.store,
		RuntimeConfig: temporal.RuntimeConfig{MaxSessionDurationSeconds: cfg.MaxSessionDuration.Seconds()},
	}
	if deps.events != nil {
		ecfg.Events = deps.events
	}
	eng, err := temporal.NewEngine(ecfg)
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	handler := hxhttp.New(hxhttp.Config{Service: eng, Logger: log, Version: version, Registry: reg, Authenticator: auth})
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	addr := ln.Addr().String()
	log.InfoContext(ctx, "hxd listening", "addr", "http://"+addr, "store", "temporal "+tc.Address+" "+tc.Namespace+"/"+tc.TaskQueue,
		"version", version, "agents", nAgents)
	if e.onListen != nil {
		e.onListen(addr)
	}
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("http shutdown", "error", err)
	}
	return nil
}
