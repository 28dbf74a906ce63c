//go:build !linux

package idem

import (
	"syscall"
	"time"
)

// userTimeoutControl is nil off Linux: keepalive alone bounds a dead connection there.
func userTimeoutControl(time.Duration) func(network, address string, c syscall.RawConn) error {
	return nil
}
