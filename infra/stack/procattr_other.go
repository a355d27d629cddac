//go:build !linux

package stack

import "syscall"

// environmentAttr puts an emulator in its own process group, so that
// stopping it stops the function process it started.
func environmentAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
