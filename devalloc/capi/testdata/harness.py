"""The Python harness of devalloc/capi's tests.

It loads libaccelkit_alloc.so with ctypes and makes the calls exactly as
PyTorch's CUDAPluggableAllocator makes them (alloc(size_t nbytes, int
device, cudaStream_t stream) -> void*, free(void* ptr, size_t nbytes, int
device, cudaStream_t stream) with the size and stream stored at alloc) and
as CuPy's CFunctionAllocator does (malloc(void* param, size_t size, int
device) -> void*, free(void* param, void* ptr, int device)), over the
tensor sizes of a small GPT training loop whose sequence length changes
every step. The fake libcuda (ACCELKIT_LIBCUDA, loaded here too: the same
instance) plays the CUDA runtime: streams are created through it.

usage: harness.py LIBRARY SNAPSHOT_PATH; prints "ok" on success.
"""
import ctypes
import json
import os
import pickle
import random
import sys

lib = ctypes.CDLL(sys.argv[1])
snapshot_path = sys.argv[2]
cuda = ctypes.CDLL(os.environ["ACCELKIT_LIBCUDA"])

c_void_p, c_size_t, c_int = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
# The function pointer types PyTorch and CuPy call through.
TORCH_ALLOC = ctypes.CFUNCTYPE(c_void_p, c_size_t, c_int, c_void_p)
TORCH_FREE = ctypes.CFUNCTYPE(None, c_void_p, c_size_t, c_int, c_void_p)
CUPY_MALLOC = ctypes.CFUNCTYPE(c_void_p, c_void_p, c_size_t, c_int)
CUPY_FREE = ctypes.CFUNCTYPE(None, c_void_p, c_void_p, c_int)
torch_alloc = TORCH_ALLOC(("accelkit_torch_alloc", lib))
torch_free = TORCH_FREE(("accelkit_torch_free", lib))
cupy_malloc = CUPY_MALLOC(("accelkit_cupy_malloc", lib))
cupy_free = CUPY_FREE(("accelkit_cupy_free", lib))
lib.accelkit_last_error.restype = ctypes.c_char_p
lib.accelkit_stats_json.argtypes = [c_int, ctypes.c_char_p, c_size_t]
lib.accelkit_stats_json.restype = ctypes.c_long
lib.accelkit_set_memory_fraction.argtypes = [ctypes.c_double, c_int]
lib.accelkit_snapshot.argtypes = [c_int, ctypes.c_char_p]


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def last_error():
    e = lib.accelkit_last_error()
    return e.decode() if e else None


def stats(device):
    n = lib.accelkit_stats_json(device, None, 0)
    if n < 0:
        fail("stats: %s" % last_error())
    buf = ctypes.create_string_buffer(n + 1)
    lib.accelkit_stats_json(device, buf, n + 1)
    return json.loads(buf.value)


def runtime_stream(device):
    """cudaSetDevice then cudaStreamCreate, as the runtime does them."""
    d, ctx, s = c_int(), c_void_p(), c_void_p()
    if cuda.cuInit(0) or cuda.cuDeviceGet(ctypes.byref(d), device):
        fail("cuDeviceGet")
    if cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), d) or cuda.cuCtxSetCurrent(ctx):
        fail("cannot make the primary context current")
    if cuda.cuStreamCreate(ctypes.byref(s), 0):
        fail("cuStreamCreate")
    return s.value


class Block:
    """What PyTorch's pluggable allocator keeps per pointer: size, device, stream."""

    def __init__(self, nbytes, device, stream):
        self.nbytes, self.device, self.stream = nbytes, device, stream
        self.ptr = torch_alloc(nbytes, device, stream)
        if not self.ptr:
            fail("alloc %d on device %d: %s" % (nbytes, device, last_error()))

    def free(self):
        torch_free(self.ptr, self.nbytes, self.device, self.stream)
        if last_error():
            fail("free: %s" % last_error())


# A GPT step's tensors (float32), batch 4, width 128, 4 layers, vocab 512,
# sequence length changing every step: activations live until backward.
random.seed(1)
compute = runtime_stream(0)
side = runtime_stream(0)
peak_alloc = 0
for step in range(40):
    T = random.choice([64, 96, 128, 192, 256])
    B, C, L, V = 4, 128, 4, 512
    acts = []
    for _ in range(L):
        for n in (B * T * C, B * T * 3 * C, B * 4 * T * T, B * T * 4 * C, B * T * C):
            acts.append(Block(4 * n, 0, compute))
    logits = Block(4 * B * T * V, 0, compute)
    grads = [Block(4 * B * T * C, 0, compute) for _ in range(L)]
    staging = Block(4 * B * T, 0, side)  # the input batch, copied on a side stream
    peak_alloc = max(peak_alloc, stats(0)["allocated_bytes.all.current"])
    for blk in reversed(acts + [logits] + grads + [staging]):
        blk.free()

s = stats(0)
if s["allocated_bytes.all.current"] != 0:
    fail("bytes left allocated: %d" % s["allocated_bytes.all.current"])
if s["allocation.all.allocated"] == 0 or s["reserved_bytes.all.peak"] < peak_alloc:
    fail("stats do not add up: %s" % s)
print("torch loop: peak allocated %d, peak reserved %d, ratio %.3f" % (
    peak_alloc, s["reserved_bytes.all.peak"], s["reserved_bytes.all.peak"] / peak_alloc))

# The default streams by handle: 0, cudaStreamLegacy, cudaStreamPerThread.
for h in (None, 1, 2):
    Block(1 << 20, 1, h).free()

# CuPy: param is the stream (0: legacy default); no size at free.
p = cupy_malloc(None, 5 << 20, 1)
if not p:
    fail("cupy malloc: %s" % last_error())
cupy_free(None, p, 1)
if last_error():
    fail("cupy free: %s" % last_error())

# Bad calls change nothing.
before = stats(0)["allocated_bytes.all.current"]
torch_free(0x1234000, 512, 0, None)
if "not a live allocation" not in (last_error() or ""):
    fail("free of an unknown pointer: %s" % last_error())
if torch_alloc(1 << 20, 5, None) is not None or "device 5 does not exist" not in (last_error() or ""):
    fail("alloc on device 5: %s" % last_error())
if stats(0)["allocated_bytes.all.current"] != before:
    fail("bad calls changed the statistics")

# empty_cache, memory fraction, snapshot.
if lib.accelkit_empty_cache(0) != 0 or stats(0)["reserved_bytes.all.current"] != 0:
    fail("empty_cache: %s" % last_error())
if lib.accelkit_set_memory_fraction(0.25, 0) != 0:
    fail("set_memory_fraction: %s" % last_error())
if torch_alloc(300 << 20, 0, None) is not None:  # the fake's device holds 1 GiB
    fail("an allocation over the memory fraction succeeded")
if "out of memory" not in (last_error() or ""):
    fail("over the fraction: %s" % last_error())
keep = Block(1 << 20, 0, compute)
if lib.accelkit_snapshot(0, snapshot_path.encode()) != 0:
    fail("snapshot: %s" % last_error())
with open(snapshot_path, "rb") as f:
    snap = pickle.load(f)
if not isinstance(snap, dict) or "segments" not in snap or "device_traces" not in snap:
    fail("snapshot is not memory_viz's dict: %r" % type(snap))
if not any(b.get("state") == "active_allocated" for seg in snap["segments"] for b in seg["blocks"]):
    fail("snapshot shows no live block")
keep.free()
print("ok")
