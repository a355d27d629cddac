package awstest

import "syscall"

// parentDeathSignal has Linux kill the SQS server when the test binary
// dies, even by SIGKILL.
func parentDeathSignal() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
