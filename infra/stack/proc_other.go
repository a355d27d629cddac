//go:build !linux

package stack

import "syscall"

// childAttr: elsewhere a backend server ends when its standard input
// closes, with the stack's process.
func childAttr() *syscall.SysProcAttr { return nil }
