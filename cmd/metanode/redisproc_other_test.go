//go:build !linux

package main

import "syscall"

// redisProcAttr: without Pdeathsig, a killed test leaves its redis-server.
func redisProcAttr() *syscall.SysProcAttr { return nil }
