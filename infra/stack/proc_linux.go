package stack

import "syscall"

// childAttr has Linux kill a backend server when the stack's process
// dies, even by SIGKILL.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
