// Package fsmode names kinds of files for the messages of filestream and
// the bolt package, which say what they found where a cache keeps its own
// file or directory.
package fsmode

import "io/fs"

// Describe names the kind of file m describes: "a symbolic link", "a
// directory", "a named pipe", "a socket", "a device", "a regular file" or
// "a special file".
func Describe(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsRegular():
		return "a regular file"
	}
	return "a special file"
}
