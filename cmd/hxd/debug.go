package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// debugConfig is --debug-addr of `hxd serve` and `hxd worker`.
type debugConfig struct {
	// Addr, when set, is a loopback address where a listener of its own
	// serves the Go profiler (/debug/pprof/*) and nothing else. Default:
	// none (no listener).
	Addr string
}

func (c *debugConfig) register(fs *flag.FlagSet, ef *envFlags) {
	fs.StringVar(&c.Addr, "debug-addr", "", "serve /debug/pprof/* only on this loopback address, e.g. 127.0.0.1:6060 (HXD_DEBUG_ADDR); off when empty")
	ef.bind("debug-addr", "HXD_DEBUG_ADDR")
}

// validate refuses an address that is not loopback: the profiler has no
// authentication, and its profiles show what the process holds.
func (c *debugConfig) validate() error {
	if c.Addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return fmt.Errorf("--debug-addr %q: %w", c.Addr, err)
	}
	if !isLoopback(host) {
		return fmt.Errorf("--debug-addr %q: the profiler listens on loopback addresses only (it has no authentication)", c.Addr)
	}
	return nil
}

// debugServer is the profiler's listener (nil when --debug-addr is empty).
type debugServer struct {
	srv  *http.Server
	done chan struct{}
}

// debugHandler serves the profiles of net/http/pprof under /debug/pprof/
// and answers 404 for every other path.
func debugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // named profiles: heap, goroutine, block, mutex, …
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// startDebug listens on c.Addr and serves debugHandler until close; with
// no address it returns nil and listens nowhere. onListen (may be nil)
// receives the bound address.
func startDebug(ctx context.Context, c debugConfig, log *slog.Logger, onListen func(string)) (*debugServer, error) {
	if c.Addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return nil, fmt.Errorf("debug listen: %w", err)
	}
	d := &debugServer{
		srv: &http.Server{
			Handler:           debugHandler(),
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		done: make(chan struct{}),
	}
	go func() {
		defer close(d.done)
		if err := d.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("debug listener stopped", "error", err)
		}
	}()
	addr := ln.Addr().String()
	log.InfoContext(ctx, "debug listener (pprof)", "addr", "http://"+addr+"/debug/pprof/")
	if onListen != nil {
		onListen(addr)
	}
	return d, nil
}

// close stops the listener at once (a profile being taken is cut short).
func (d *debugServer) close() {
	if d == nil {
		return
	}
	_ = d.srv.Close()
	<-d.done
}
