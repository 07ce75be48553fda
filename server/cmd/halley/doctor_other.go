//go:build !unix

package main

import "errors"

func diskFree(string) (free, total uint64, err error) {
	return 0, 0, errors.New("free disk space is checked on Unix hosts only")
}

func canWrite(string) error { return errors.New("checked on Unix hosts only") }
