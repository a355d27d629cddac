package awslocal

import "syscall"

// parentDeathSignal has Linux kill a server when the process that started
// it dies, even by SIGKILL.
func parentDeathSignal() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
