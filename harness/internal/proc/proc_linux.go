package proc

import "syscall"

// sysProcAttr puts the child in its own process group, so Stop can signal it and everything it
// forked, and asks the kernel to SIGKILL it when the test binary dies, whatever the reason
// (panic, timeout, kill -9). Go sets the parent-death signal after any Credential change, so it
// survives dropping root.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func signalGroup(pid int, sig syscall.Signal) {
	// A negative pid signals the whole process group.
	_ = syscall.Kill(-pid, sig)
}
