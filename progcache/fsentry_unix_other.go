//go:build unix && !linux

package progcache

func (d *cacheDir) openEntryFD(shard, name string) (int, error) {
	return d.openEntryFDTwoStep(shard, name)
}
