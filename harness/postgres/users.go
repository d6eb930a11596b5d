package postgres

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// runAs is the unprivileged account a server runs as when we are root: PostgreSQL refuses to
// run as root, and CI runs as root.
type runAs struct {
	name     string
	uid, gid uint32
}

func unprivilegedUser() (*runAs, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		return &runAs{name: name, uid: uint32(uid), gid: uint32(gid)}, nil
	}
	return nil, errors.New("running as root, and neither a postgres nor a nobody user exists to run PostgreSQL as " +
		"(PostgreSQL refuses to run as root): create one with useradd -r postgres, or set " + EnvURL)
}

func (u *runAs) apply(cmd *exec.Cmd) {
	if u == nil {
		return
	}
	// Go switches user in the child between fork and exec, like setpriv, without needing the
	// tool, and sets the parent-death signal after the switch so it still holds.
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: u.uid, Gid: u.gid}
	cmd.Env = append(os.Environ(), "HOME="+cmd.Dir, "USER="+u.name, "LOGNAME="+u.name)
}

// traversable checks that as can reach dir: every directory from / down must let it search.
func traversable(dir string, as *runAs) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for p := abs; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		mode := fi.Mode().Perm()
		canSearch := mode&0o001 != 0 ||
			(ok && st.Uid == as.uid && mode&0o100 != 0) ||
			(ok && st.Gid == as.gid && mode&0o010 != 0)
		if !canSearch {
			return fmt.Errorf("user %s, which runs PostgreSQL because we are root, cannot reach %s (%s is %v); "+
				"use a directory under /tmp", as.name, dir, p, mode)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// Reachable reports whether a server started here could keep its files in dir, which must
// exist: when running as root the server runs as an unprivileged user, who must be able to
// search every directory from / down to dir. The error says what to do otherwise.
func Reachable(dir string) error {
	as, err := unprivilegedUser()
	if err != nil || as == nil {
		return err
	}
	return traversable(dir, as)
}

func userName(as *runAs) string {
	if as == nil {
		return "the current user"
	}
	return as.name
}
