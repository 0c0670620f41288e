//go:build !(linux || darwin)

package bolt

import "errors"

func mkfifo(string) error { return errors.ErrUnsupported }

func mknodZero(string) error { return errors.ErrUnsupported }
