package backendkit

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/accelkit/accelkit/driver"
)

// fakeStream is a Stream of a given device.
type fakeStream struct {
	driver.Stream
	dev driver.Device
}

func (s *fakeStream) Device() driver.Device { return s.dev }

// otherStream is a stream type of another backend.
type otherStream struct{ fakeStream }

// streamDev is a device whose default stream is known.
type streamDev struct {
	driver.Device
	def *fakeStream
}

func (d *streamDev) DefaultStream() driver.Stream { return d.def }

// newState returns a live DeviceState for a fresh streamDev.
func newState() (*DeviceState, *streamDev) {
	d := &streamDev{}
	d.def = &fakeStream{dev: d}
	return &DeviceState{Who: "test device 3", Public: d}, d
}

func TestStreamOr(t *testing.T) {
	_, d := newState()
	other := &fakeStream{dev: d}
	if got := driver.StreamOr(d, nil); got != driver.Stream(d.def) {
		t.Errorf("StreamOr(dev, nil) = %v; want the default stream", got)
	}
	if got := driver.StreamOr(d, other); got != driver.Stream(other) {
		t.Errorf("StreamOr(dev, s) = %v; want s", got)
	}
}

// wantErr fails unless err wraps want and its message says every text.
func wantErr(t *testing.T, name string, err, want error, text ...string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: error %v does not wrap %v", name, err, want)
		return
	}
	for _, s := range text {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: error %q does not say %q", name, err, s)
		}
	}
}

func TestDeviceStateLifecycle(t *testing.T) {
	s, _ := newState()
	if err := s.Check("Malloc"); err != nil || !s.Live() {
		t.Fatalf("a new DeviceState: Check = %v, Live = %v; want nil, true", err, s.Live())
	}
	lost := fmt.Errorf("%w (test)", driver.ErrDeviceLost)
	if !s.Lose(lost) {
		t.Error("the first Lose did not report losing the device")
	}
	if s.Lose(errors.New("second loss")) {
		t.Error("a second Lose reported losing the device again")
	}
	wantErr(t, "Check after Lose", s.Check("Malloc"), driver.ErrDeviceLost, "test device 3: Malloc: driver: device lost (test)")
	if s.Live() {
		t.Error("Live after Lose")
	}
	if !s.Close() {
		t.Error("Close of a lost device did not report closing it")
	}
	if s.Close() {
		t.Error("a second Close reported closing the device again")
	}
	wantErr(t, "Check after Close of a lost device", s.Check("Free"), driver.ErrClosed, "test device 3: Free: driver: closed")
	if s.Lose(lost) {
		t.Error("Lose after Close reported losing the device")
	}
	wantErr(t, "Check after Lose of a closed device", s.Check("Free"), driver.ErrClosed)
}

// TestDeviceStateRace races Lose and Close: the device ends closed, and
// exactly one Lose and one Close report success.
func TestDeviceStateRace(t *testing.T) {
	s, _ := newState()
	var mu sync.Mutex
	var losses, closes int
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			if i%2 == 0 {
				if s.Lose(driver.ErrDeviceLost) {
					mu.Lock()
					losses++
					mu.Unlock()
				}
				return
			}
			if s.Close() {
				mu.Lock()
				closes++
				mu.Unlock()
			}
			_ = s.Check("Malloc")
		})
	}
	wg.Wait()
	if losses > 1 || closes != 1 {
		t.Errorf("%d Lose and %d Close calls reported success; want at most 1 and exactly 1", losses, closes)
	}
	wantErr(t, "Check after the race", s.Check("Malloc"), driver.ErrClosed)
}

func TestChecks(t *testing.T) {
	s, _ := newState()
	tests := []struct {
		name string
		err  error
		want error    // nil: the check passes
		text []string // the message names these
	}{
		{"closed", ClosedError("test", "Device(0)"), driver.ErrClosed, []string{"test: Device(0): driver: closed"}},
		{"ordinal in range", CheckOrdinal("test", 1, 2), nil, nil},
		{"ordinal negative", CheckOrdinal("test", -1, 2), driver.ErrNoDevice, []string{"test: device ordinal -1 out of range [0, 2)"}},
		{"ordinal past the end", CheckOrdinal("test", 2, 2), driver.ErrNoDevice, []string{"[0, 2)"}},
		{"host freed", s.HostFreedError(64), driver.ErrInvalidPointer, []string{"test device 3: HostFree: buffer of 64 bytes already freed"}},
		{"unknown pointer", s.UnknownPointerError(0x1000), driver.ErrInvalidPointer, []string{"Free(0x1000)", "not a live allocation", "already freed"}},
		{"destroyed", s.DestroyedError("Stream.Query", "stream 4"), driver.ErrInvalidValue, []string{"Stream.Query: stream 4 was destroyed"}},
		{"not pinned", s.NotPinnedError("CopyHtoD", make([]byte, 10)), driver.ErrNotPinned, []string{"CopyHtoD: 10 bytes at 0x", "not inside a live HostBuffer"}},
		{"granularity multiple", s.CheckGranularity("MemCreate", "size", 4<<20, 2<<20, false), nil, nil},
		{"granularity offset 0", s.CheckGranularity("MemMap", "offset", 0, 2<<20, true), nil, nil},
		{"granularity size 0", s.CheckGranularity("MemCreate", "size", 0, 2<<20, false), driver.ErrInvalidValue, []string{"MemCreate: size 0 is not a positive multiple of the granularity 2097152"}},
		{"granularity not a multiple", s.CheckGranularity("MemMap", "offset", 4096, 2<<20, true), driver.ErrInvalidValue, []string{"offset 4096"}},
		{"alignment 0", s.CheckAlignment("AddressReserve", 0), nil, nil},
		{"alignment power of two", s.CheckAlignment("AddressReserve", 1<<30), nil, nil},
		{"alignment not a power of two", s.CheckAlignment("AddressReserve", 3<<20), driver.ErrInvalidValue, []string{"AddressReserve: alignment 3145728 is not 0 or a power of two"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want == nil {
				if tt.err != nil {
					t.Fatalf("got %v; want nil", tt.err)
				}
				return
			}
			wantErr(t, tt.name, tt.err, tt.want, tt.text...)
		})
	}
}

// resolve is a backend's stream resolution with CheckStream: fakeStream is
// its stream type.
func resolve(s *DeviceState, op string, st driver.Stream) (*fakeStream, error) {
	own, ok := driver.StreamOr(s.Public, st).(*fakeStream)
	if err := s.CheckStream(op, st, ok && own != nil && own.dev == s.Public); err != nil {
		return nil, err
	}
	return own, nil
}

func TestCheckStream(t *testing.T) {
	s, d := newState()
	mine := &fakeStream{dev: d}
	if got, err := resolve(s, "Memset", nil); got != d.def || err != nil {
		t.Errorf("resolve(nil) = %v, %v; want the default stream (nil is the default stream)", got, err)
	}
	if got, err := resolve(s, "Memset", mine); got != mine || err != nil {
		t.Errorf("resolve(own stream) = %v, %v; want it", got, err)
	}
	_, other := newState()
	for _, tt := range []struct {
		name string
		st   driver.Stream
	}{
		{"another device's stream", &fakeStream{dev: other}},
		{"another backend's stream", &otherStream{fakeStream{dev: d}}},
		{"a nil pointer of the stream type", (*fakeStream)(nil)},
	} {
		got, err := resolve(s, "Memset", tt.st)
		if got != nil {
			t.Errorf("%s: resolve returned %v", tt.name, got)
		}
		wantErr(t, tt.name, err, driver.ErrInvalidValue, "test device 3: Memset: stream", "is not a stream of this device")
	}
	s.Lose(driver.ErrDeviceLost)
	_, err := resolve(s, "Memset", mine)
	wantErr(t, "CheckStream on a lost device", err, driver.ErrDeviceLost, "Memset")
	_, err = resolve(s, "Memset", &fakeStream{dev: other})
	wantErr(t, "CheckStream on a lost device, given a foreign stream", err, driver.ErrDeviceLost, "Memset")
}

// hostState is a backend's HostBuffer bookkeeping, for HostBufferState.
type hostState struct{ size int }

func TestHostAllocAndFree(t *testing.T) {
	s, _ := newState()
	if b, err := s.CheckHostAlloc(4096); b != nil || err != nil {
		t.Errorf("CheckHostAlloc(4096) = %v, %v; want nil, nil: the backend allocates", b, err)
	}
	_, err := s.CheckHostAlloc(-1)
	wantErr(t, "CheckHostAlloc(-1)", err, driver.ErrInvalidValue, "test device 3: HostAlloc(-1): size must be >= 0")

	empty, err := s.CheckHostAlloc(0)
	if err != nil || empty == nil || empty.Len() != 0 || empty.Device() != s.Public {
		t.Fatalf("CheckHostAlloc(0) = %v, %v; want an empty buffer of the device", empty, err)
	}
	if st, ok, err := HostBufferState[*hostState](s, empty); st != nil || ok || err != nil {
		t.Errorf("HostBufferState(empty) = %v, %v, %v; want nil, false, nil: freed by the helper", st, ok, err)
	}
	_, ok, err := HostBufferState[*hostState](s, empty)
	if ok {
		t.Error("a second HostFree of an empty buffer reached the backend")
	}
	wantErr(t, "second HostFree of an empty buffer", err, driver.ErrInvalidPointer, "buffer of 0 bytes already freed")

	mine := driver.NewHostBuffer(s.Public, make([]byte, 8), &hostState{size: 8})
	st, ok, err := HostBufferState[*hostState](s, mine)
	if err != nil || !ok || st == nil || st.size != 8 {
		t.Fatalf("HostBufferState of the device's own buffer = %v, %v, %v; want its state", st, ok, err)
	}
	other, _ := newState()
	otherEmpty, _ := other.CheckHostAlloc(0)
	tests := []struct {
		name string
		b    *driver.HostBuffer
		want error
		text string
	}{
		{"nil", nil, driver.ErrInvalidValue, "HostFree(nil)"},
		{"another device's buffer", driver.NewHostBuffer(other.Public, nil, &hostState{}), driver.ErrInvalidPointer, "not allocated by this device's HostAlloc"},
		{"another device's empty buffer", otherEmpty, driver.ErrInvalidPointer, "not allocated by this device's HostAlloc"},
		{"another backend's buffer", driver.NewHostBuffer(s.Public, nil, "not a *hostState"), driver.ErrInvalidPointer, "not allocated by this device's HostAlloc"},
	}
	for _, tt := range tests {
		st, ok, err := HostBufferState[*hostState](s, tt.b)
		if st != nil || ok {
			t.Errorf("%s: HostBufferState = %v, %v; want nil, false", tt.name, st, ok)
		}
		wantErr(t, tt.name, err, tt.want, "test device 3: ", tt.text)
	}
	s.Close()
	_, err = s.CheckHostAlloc(0)
	wantErr(t, "CheckHostAlloc after Close", err, driver.ErrClosed, "HostAlloc")
	_, _, err = HostBufferState[*hostState](s, mine)
	wantErr(t, "HostBufferState after Close", err, driver.ErrClosed, "HostFree")
}

func TestHostRegisterChecks(t *testing.T) {
	s, _ := newState()
	mem := make([]byte, 64)
	if err := s.CheckHostRegister(mem); err != nil {
		t.Errorf("CheckHostRegister(64 bytes) = %v; want nil: the backend registers", err)
	}
	wantErr(t, "CheckHostRegister(empty)", s.CheckHostRegister(mem[:0]), driver.ErrInvalidValue,
		"test device 3: HostRegister: empty memory", "at least 1 byte")
	wantErr(t, "CheckHostRegister(nil)", s.CheckHostRegister(nil), driver.ErrInvalidValue, "empty memory")

	err := s.RegisterOverlapError(mem[8:24], 0x1000, 0x2000, "a HostAlloc buffer of test device 3")
	wantErr(t, "RegisterOverlapError", err, driver.ErrAlreadyRegistered,
		fmt.Sprintf("HostRegister: [%p, ", &mem[8]), "(16 bytes) overlaps a HostAlloc buffer of test device 3 at [0x1000, 0x2000)", "disjoint")

	reg := driver.NewHostBuffer(s.Public, mem, &hostState{size: 64})
	st, ok, err := HostRegistrationState[*hostState](s, reg)
	if err != nil || !ok || st == nil || st.size != 64 {
		t.Fatalf("HostRegistrationState of the device's own buffer = %v, %v, %v; want its state", st, ok, err)
	}
	other, _ := newState()
	empty, _ := s.CheckHostAlloc(0)
	tests := []struct {
		name string
		b    *driver.HostBuffer
		want error
		text string
	}{
		{"nil", nil, driver.ErrInvalidValue, "HostUnregister(nil)"},
		{"another device's buffer", driver.NewHostBuffer(other.Public, mem, &hostState{}), driver.ErrNotRegistered, "was not made by this device's HostRegister"},
		{"an empty HostAlloc buffer", empty, driver.ErrNotRegistered, "(0 bytes) was not made by this device's HostRegister"},
		{"another backend's buffer", driver.NewHostBuffer(s.Public, mem, "not a *hostState"), driver.ErrNotRegistered, "(64 bytes) was not made"},
	}
	for _, tt := range tests {
		st, ok, err := HostRegistrationState[*hostState](s, tt.b)
		if st != nil || ok {
			t.Errorf("%s: HostRegistrationState = %v, %v; want nil, false", tt.name, st, ok)
		}
		wantErr(t, tt.name, err, tt.want, "test device 3: HostUnregister", tt.text)
	}
	wantErr(t, "NotRegisteredError", s.NotRegisteredError(reg, "was unregistered already"), driver.ErrNotRegistered,
		fmt.Sprintf("HostUnregister: buffer [%p, ", &mem[0]), "(64 bytes) was unregistered already", "live buffer from this device's HostRegister")
	wantErr(t, "RegisteredFreeError", s.RegisteredFreeError(reg), driver.ErrInvalidPointer,
		"test device 3: HostFree: buffer [", "is a HostRegister registration, not a HostAlloc buffer; release it with HostUnregister")

	s.Close()
	wantErr(t, "CheckHostRegister after Close", s.CheckHostRegister(mem), driver.ErrClosed, "HostRegister")
	_, _, err = HostRegistrationState[*hostState](s, reg)
	wantErr(t, "HostRegistrationState after Close", err, driver.ErrClosed, "HostUnregister")
}
