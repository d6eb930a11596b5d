//go:build unix && !linux

package proc

import "syscall"

// sysProcAttr puts the child in its own process group. Only Linux can tie a child's life to its
// parent's; elsewhere a killed test binary leaves servers running until Stop or a reboot.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

func signalGroup(pid int, sig syscall.Signal) {
	_ = syscall.Kill(-pid, sig)
}

// descendants is not known here: SignalTree signals the group only.
func descendants(int) []int { return nil }
