package stack

import "syscall"

// environmentAttr puts an emulator in its own process group (so that
// stopping it stops the function process it started) and has Linux kill it
// when the stack's process dies, even by SIGKILL.
func environmentAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
