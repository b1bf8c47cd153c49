//go:build linux

package e2e

import "os"

func lstat(p string) (uint32, error) {
	st, err := os.Lstat(p)
	if err != nil {
		return 0, err
	}
	return uint32(st.Mode().Perm()), nil
}
