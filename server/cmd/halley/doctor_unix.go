//go:build unix

package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// diskFree returns the bytes free (to unprivileged users) and the size of the file system holding path.
func diskFree(path string) (free, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, err
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil //nolint:gosec // block sizes are positive
}

// canWrite asks the kernel whether this process may write in dir (create entries, or for a cgroup, sub-groups).
func canWrite(dir string) error {
	if err := unix.Access(dir, unix.W_OK); err != nil {
		return fmt.Errorf("not writable: %w", err)
	}
	return nil
}
