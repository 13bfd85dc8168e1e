//go:build !linux

package mcp

import "os/exec"

// startCmd starts cmd. Only Linux has a parent-death signal; elsewhere a
// SIGKILLed hxd leaves its stdio children to notice the closed stdin.
func startCmd(cmd *exec.Cmd) error {
	return cmd.Start()
}
