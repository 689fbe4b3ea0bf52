package main

import "syscall"

// redisProcAttr makes the kernel kill a test's redis-server when the test
// process dies, even killed (no cleanup runs then).
func redisProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
