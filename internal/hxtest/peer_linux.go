package hxtest

import "syscall"

// PeerProcAttr starts a test peer in its own process group (so that
// stopping it stops its children) and has the kernel kill it when the
// test binary dies, even by a signal that runs no cleanup.
func PeerProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
