//go:build !linux

package awslocal

import "syscall"

// parentDeathSignal: elsewhere a server ends when its standard input
// closes, with the process that started it.
func parentDeathSignal() *syscall.SysProcAttr { return nil }
