//go:build unix

package filestream

import "golang.org/x/sys/unix"

// openEntryFDTwoStep opens the shard directory and then the file in it,
// each with O_NOFOLLOW, and returns the raw errno on failure.
func (d *cacheDir) openEntryFDTwoStep(shard, name string) (int, error) {
	var sfd int
	err := ignoringEINTR(func() (err error) {
		sfd, err = unix.Openat(d.fd, shard, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return -1, err
	}
	defer unix.Close(sfd)
	var fd int
	err = ignoringEINTR(func() (err error) {
		fd, err = unix.Openat(sfd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		return err
	})
	return fd, err
}
