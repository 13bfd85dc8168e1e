//go:build !linux

package hxtest

import "syscall"

// PeerProcAttr starts a test peer in its own process group (so that
// stopping it stops its children). Only Linux also kills it when the test
// binary dies without cleanup.
func PeerProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
