//go:build !linux

package plugin

// warmServers: the warm Python runtime needs Linux, like the process runner.
type warmServers struct{}

func (*warmServers) closeAll() {}
