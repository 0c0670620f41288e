//go:build unix

package devalloc

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/accelkit/accelkit/devalloc/memsnap"
	"github.com/accelkit/accelkit/driver/drivertest"
)

// SIGUSR1 and kill exist on unix only; NotifySnapshotOnSignal itself takes
// any os.Signal.
func TestSnapshotOnSignal(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	path := filepath.Join(t.TempDir(), "sig.json")
	a := newAlloc(t, dev, "")
	p := mustAlloc(t, a, 1*mib, dev.DefaultStream())
	written := make(chan struct{}, 1)
	a.snapWritten = func() { written <- struct{}{} }
	stop := a.NotifySnapshotOnSignal(syscall.SIGUSR1, path)
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	<-written
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := memsnap.Read(bytes.NewReader(data))
	if err != nil || len(snap.Segments) != 1 {
		t.Errorf("signal snapshot: %v, %+v", err, snap)
	}
	mustFree(t, a, p)
}
