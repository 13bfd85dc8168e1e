package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// The bare workflow: n sequential no-op activities, what Temporal itself
// costs a run with as many activities as hxd's.
const (
	bareWorkflowType = "HxdPeersBare"
	bareActivity     = "hxd_peers_noop"
)

func bareWorkflow(ctx workflow.Context, n int) (int, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
	sum := 0
	for i := range n {
		var out int
		if err := workflow.ExecuteActivity(ctx, bareActivity, i).Get(ctx, &out); err != nil {
			return 0, err
		}
		sum += out
	}
	return sum, nil
}

func bareNoop(_ context.Context, i int) (int, error) { return i, nil }

// S3 settings of the versitygw the Temporal engine stores artifacts in.
const (
	s3Access = "hxdpeers"
	s3Secret = "hxdpeers-secret"
	s3Region = "us-east-1"
	s3Bucket = "hxd-peers"
)

// runTemporal starts a Temporal dev server (the pinned CLI of
// scripts/build-temporal.sh), versitygw as S3, `hxd serve --engine
// temporal` and one `hxd worker`, and a bare workflow's worker in this
// process, then measures both at cfg.TemporalConcurrency, interleaved.
// A missing peer binary skips the comparison with a note.
func (e *env) runTemporal(ctx context.Context, cfg *config, log *slog.Logger, want func(string) bool) ([]*cell, string, error) {
	cli, err := e.peerBinary(ctx, "build-temporal.sh", "HXD_TEMPORAL_CLI")
	if err != nil {
		return nil, fmt.Sprintf("Temporal comparison skipped: the Temporal CLI is unavailable: %v", err), nil
	}
	vgw, err := e.peerBinary(ctx, "build-versitygw.sh", "HXD_VERSITYGW")
	if err != nil {
		return nil, fmt.Sprintf("Temporal comparison skipped: versitygw is unavailable: %v", err), nil
	}
	taddr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	host, port, _ := net.SplitHostPort(taddr)
	tp, err := e.start("temporal", []string{cli, "server", "start-dev", "--headless", "--ip", host, "--port", port,
		"--db-filename", "", "--log-level", "error"})
	if err != nil {
		return nil, "", err
	}
	var tc client.Client
	if err := tp.waitReady(ctx, func(ctx context.Context) error {
		c, err := client.Dial(client.Options{HostPort: taddr, Namespace: "default", Logger: quietTemporalLogger()})
		if err != nil {
			return err
		}
		if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
			c.Close()
			return err
		}
		if _, err := c.WorkflowService().GetSystemInfo(ctx, nil); err != nil {
			c.Close()
			return err
		}
		tc = c
		return nil
	}); err != nil {
		return nil, "", err
	}
	e.closers = append(e.closers, tc.Close)

	s3addr, err := e.startS3(ctx, vgw)
	if err != nil {
		return nil, "", err
	}
	agents, err := e.writeAgents()
	if err != nil {
		return nil, "", err
	}
	work, err := e.tempDir()
	if err != nil {
		return nil, "", err
	}
	queue := "hxd-peers-" + e.run
	flags := []string{"--temporal-address", taddr, "--namespace", "default", "--task-queue", queue,
		"--s3-endpoint", "http://" + s3addr, "--s3-bucket", s3Bucket, "--s3-region", s3Region,
		"--agents", agents, "--workdir", work}
	redisNote := ""
	if r := redisAddr(); r != "" {
		flags = append(flags, "--redis-addr", r)
	} else {
		redisNote = " (without Redis: none listens at HXD_TEST_REDIS_ADDR, so run events are not published)"
	}
	s3env := []string{"HXD_S3_ACCESS_KEY=" + s3Access, "HXD_S3_SECRET_KEY=" + s3Secret}
	if _, err := e.start("hxd-worker", append([]string{e.hxdBin, "worker"}, flags...), s3env...); err != nil {
		return nil, "", err
	}
	hc, err := e.startHxd(ctx, "hxd-temporal", append([]string{"--engine", "temporal", "--shutdown-timeout", "2s"}, flags...), s3env...)
	if err != nil {
		return nil, "", err
	}
	hc.http = newHTTPClient(cfg.TemporalConcurrency)

	bareQueue := queue + "-bare"
	bw := worker.New(tc, bareQueue, worker.Options{})
	bw.RegisterWorkflowWithOptions(bareWorkflow, workflow.RegisterOptions{Name: bareWorkflowType})
	bw.RegisterActivityWithOptions(bareNoop, activity.RegisterOptions{Name: bareActivity})
	if err := bw.Start(); err != nil {
		return nil, "", fmt.Errorf("bare worker: %w", err)
	}
	e.closers = append(e.closers, bw.Stop)

	var systems []*system
	if want(sysTemporalBare) {
		systems = append(systems, &system{name: sysTemporalBare, effects: effectsPerRun, op: func(ctx context.Context, _ int) error {
			run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "bare-" + randomHex(8), TaskQueue: bareQueue},
				bareWorkflowType, effectsPerRun)
			if err != nil {
				return err
			}
			var sum int
			return run.Get(ctx, &sum)
		}})
	}
	if want(sysTemporalHxd) {
		systems = append(systems, &system{name: sysTemporalHxd, effects: effectsPerRun,
			op: func(ctx context.Context, _ int) error { return hc.run(ctx) }, profile: hc.cpuProfile})
	}
	for _, s := range systems {
		if _, err := measure(ctx, s, 1, 0); err != nil {
			return nil, "", fmt.Errorf("warm-up: %w", err)
		}
	}
	tcfg := *cfg
	tcfg.Duration = cfg.TemporalDuration
	cells, err := runInterleaved(ctx, &tcfg, e, log, systems, []int{cfg.TemporalConcurrency})
	if err != nil {
		return nil, "", err
	}
	note := "Temporal: dev server (temporal server start-dev, in memory) of the pinned CLI, versitygw as S3, one hxd worker" + redisNote
	return cells, note, nil
}

// redisAddr is HXD_TEST_REDIS_ADDR (default 127.0.0.1:6379) when
// something listens there, else "".
func redisAddr() string {
	addr := os.Getenv("HXD_TEST_REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	hostport := strings.TrimPrefix(addr, "redis://")
	if i := strings.IndexByte(hostport, '/'); i >= 0 {
		hostport = hostport[:i]
	}
	if i := strings.LastIndexByte(hostport, '@'); i >= 0 {
		hostport = hostport[i+1:]
	}
	conn, err := net.DialTimeout("tcp", hostport, time.Second)
	if err != nil {
		return ""
	}
	_ = conn.Close()
	return addr
}

// startS3 starts versitygw (posix backend in a temporary folder) and
// creates the bucket.
func (e *env) startS3(ctx context.Context, bin string) (string, error) {
	addr, err := freeAddr()
	if err != nil {
		return "", err
	}
	dir, err := e.tempDir()
	if err != nil {
		return "", err
	}
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		return "", err
	}
	p, err := e.start("versitygw", []string{bin, "--port", addr, "--access", s3Access, "--secret", s3Secret,
		"--region", s3Region, "--quiet", "posix", root})
	if err != nil {
		return "", err
	}
	mc, err := minio.New(addr, &minio.Options{Creds: credentials.NewStaticV4(s3Access, s3Secret, ""), Region: s3Region})
	if err != nil {
		return "", err
	}
	err = p.waitReady(ctx, func(ctx context.Context) error {
		err := mc.MakeBucket(ctx, s3Bucket, minio.MakeBucketOptions{Region: s3Region})
		if err != nil && minio.ToErrorResponse(err).Code != "BucketAlreadyOwnedByYou" {
			return err
		}
		return nil
	})
	return addr, err
}

func quietTemporalLogger() tlog.Logger {
	return tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
}
