//go:build unix && !linux

package filestream

import "golang.org/x/sys/unix"

func (d *cacheDir) openEntryFD(shard, name string) (int, error) {
	return d.openEntryFDTwoStep(shard, name)
}

// openEntryAt is openEntry (see the Linux version).
func (d *cacheDir) openEntryAt(p *entryPath) (entryFile, error) {
	return d.openEntry(p.shard(), p.name())
}

// statEntryAt stats entries/<p> without following a link (see the Linux
// version).
func (d *cacheDir) statEntryAt(p *entryPath) (fileStat, error) {
	var st unix.Stat_t
	err := ignoringEINTR(func() error {
		return unix.Fstatat(d.fd, p.shard()+"/"+p.name(), &st, unix.AT_SYMLINK_NOFOLLOW)
	})
	if err != nil {
		return fileStat{}, err
	}
	return statOf(&st), nil
}

// openEntryFDAt opens entries/<p> without the fstat (see the Linux
// version).
func (d *cacheDir) openEntryFDAt(p *entryPath) (int, error) {
	return d.openEntryFD(p.shard(), p.name())
}
