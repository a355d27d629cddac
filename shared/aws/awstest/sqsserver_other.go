//go:build !linux

package awstest

import "syscall"

// parentDeathSignal: elsewhere the closed stdin pipe alone ends the server.
func parentDeathSignal() *syscall.SysProcAttr { return nil }
