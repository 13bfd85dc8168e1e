//go:build linux

package mcp

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// On Linux a stdio child gets SIGKILL when hxd dies (Pdeathsig), so a
// SIGKILLed hxd leaves no orphaned server behind.
//
// The kernel sends the death signal when the *thread* that forked the
// child exits, not the process (prctl(2) PR_SET_PDEATHSIG; golang/go
// #27505). The Go runtime ends an OS thread only when a goroutine locked
// to it exits without unlocking, which any goroutine may do on any idle
// thread: a child started from an ordinary goroutine could then be killed
// while hxd lives on. So every child is started by one goroutine that
// locks its thread and never unlocks nor returns: that thread lives as
// long as the process, and the signal comes only when hxd itself is gone.

// startReq asks the starter goroutine to start cmd.
type startReq struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	starterOnce sync.Once
	starterReqs chan startReq
)

// startCmd starts cmd with Pdeathsig SIGKILL from the starter's thread.
func startCmd(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	starterOnce.Do(func() {
		starterReqs = make(chan startReq)
		go startLoop(starterReqs)
	})
	done := make(chan error, 1)
	starterReqs <- startReq{cmd: cmd, done: done}
	return <-done
}

// startLoop starts the children of the process, for the process lifetime,
// on a thread of its own (never unlocked; see above).
func startLoop(reqs <-chan startReq) {
	runtime.LockOSThread()
	for r := range reqs {
		r.done <- r.cmd.Start()
	}
}
