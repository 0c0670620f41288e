package driver

import (
	"errors"
	"strings"
	"testing"
)

// fakeStream is a Stream of a given device, for StreamOr.
type fakeStream struct {
	Stream
	dev Device
}

func (s *fakeStream) Device() Device { return s.dev }

// streamDev is a device whose default stream is known.
type streamDev struct {
	Device
	def *fakeStream
}

func (d *streamDev) DefaultStream() Stream { return d.def }

func TestStreamOr(t *testing.T) {
	d := &streamDev{}
	d.def = &fakeStream{dev: d}
	other := &fakeStream{dev: d}
	if got := StreamOr(d, nil); got != Stream(d.def) {
		t.Errorf("StreamOr(dev, nil) = %v; want the default stream", got)
	}
	if got := StreamOr(d, other); got != Stream(other) {
		t.Errorf("StreamOr(dev, s) = %v; want s", got)
	}
}

func TestChecks(t *testing.T) {
	const who = "test device 3"
	tests := []struct {
		name string
		err  error
		want error    // nil: the check passes
		text []string // the message names these
	}{
		{"closed", ClosedError(who, "Malloc"), ErrClosed, []string{"test device 3: Malloc: driver closed"}},
		{"ordinal in range", CheckOrdinal("test", 1, 2), nil, nil},
		{"ordinal negative", CheckOrdinal("test", -1, 2), ErrNoDevice, []string{"test: device ordinal -1 out of range [0, 2)"}},
		{"ordinal past the end", CheckOrdinal("test", 2, 2), ErrNoDevice, []string{"[0, 2)"}},
		{"host alloc 0", CheckHostAlloc(who, 0), nil, nil},
		{"host alloc positive", CheckHostAlloc(who, 4096), nil, nil},
		{"host alloc negative", CheckHostAlloc(who, -1), ErrInvalidValue, []string{"test device 3: HostAlloc(-1): size must be >= 0"}},
		{"host freed", HostFreedError(who, 64), ErrInvalidPointer, []string{"HostFree: buffer of 64 bytes already freed"}},
		{"unknown pointer", UnknownPointerError(who, 0x1000), ErrInvalidPointer, []string{"Free(0x1000)", "not a live allocation", "already freed"}},
		{"foreign stream", ForeignStreamError(who, "Memset", &fakeStream{}), ErrInvalidValue, []string{"Memset: stream *driver.fakeStream is not a stream of this device"}},
		{"destroyed", DestroyedError(who, "Stream.Query", "stream 4"), ErrInvalidValue, []string{"Stream.Query: stream 4 was destroyed"}},
		{"not pinned", NotPinnedError(who, "CopyHtoD", make([]byte, 10)), ErrNotPinned, []string{"CopyHtoD: 10 bytes at 0x", "not inside a live HostBuffer"}},
		{"granularity multiple", CheckGranularity(who, "MemCreate", "size", 4<<20, 2<<20, false), nil, nil},
		{"granularity offset 0", CheckGranularity(who, "MemMap", "offset", 0, 2<<20, true), nil, nil},
		{"granularity size 0", CheckGranularity(who, "MemCreate", "size", 0, 2<<20, false), ErrInvalidValue, []string{"MemCreate: size 0 is not a positive multiple of the granularity 2097152"}},
		{"granularity not a multiple", CheckGranularity(who, "MemMap", "offset", 4096, 2<<20, true), ErrInvalidValue, []string{"offset 4096"}},
		{"alignment 0", CheckAlignment(who, "AddressReserve", 0), nil, nil},
		{"alignment power of two", CheckAlignment(who, "AddressReserve", 1<<30), nil, nil},
		{"alignment not a power of two", CheckAlignment(who, "AddressReserve", 3<<20), ErrInvalidValue, []string{"AddressReserve: alignment 3145728 is not 0 or a power of two"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want == nil {
				if tt.err != nil {
					t.Fatalf("got %v; want nil", tt.err)
				}
				return
			}
			if !errors.Is(tt.err, tt.want) {
				t.Fatalf("error %v does not wrap %v", tt.err, tt.want)
			}
			for _, s := range tt.text {
				if !strings.Contains(tt.err.Error(), s) {
					t.Errorf("error %q does not say %q", tt.err, s)
				}
			}
		})
	}
}

// hostState is a backend's HostBuffer bookkeeping, for HostBufferState.
type hostState struct{ size int }

func TestHostBufferState(t *testing.T) {
	const who = "test device 0"
	dev, other := &streamDev{}, &streamDev{}
	mine := NewHostBuffer(dev, make([]byte, 8), &hostState{size: 8})
	st, err := HostBufferState[*hostState](who, dev, mine)
	if err != nil || st == nil || st.size != 8 {
		t.Fatalf("HostBufferState of the device's own buffer = %v, %v; want its state", st, err)
	}
	tests := []struct {
		name string
		b    *HostBuffer
		want error
		text string
	}{
		{"nil", nil, ErrInvalidValue, "HostFree(nil)"},
		{"another device's buffer", NewHostBuffer(other, nil, &hostState{}), ErrInvalidPointer, "not allocated by this device's HostAlloc"},
		{"another backend's buffer", NewHostBuffer(dev, nil, "not a *hostState"), ErrInvalidPointer, "not allocated by this device's HostAlloc"},
	}
	for _, tt := range tests {
		st, err := HostBufferState[*hostState](who, dev, tt.b)
		if st != nil || !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.text) || !strings.HasPrefix(err.Error(), who) {
			t.Errorf("%s: HostBufferState = %v, %v; want nil and an error from %s wrapping %v saying %q", tt.name, st, err, who, tt.want, tt.text)
		}
	}
}
