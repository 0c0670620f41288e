"""PyTorch's caching allocators on their native hit path, for accbench -peers.

Builds a small C++ extension with torch.utils.cpp_extension.load_inline and
times, in C++ (no Python in the loop):

  device_warm     raw_alloc_with_stream + raw_delete of one size, warm cache
  device_pool     the same pair with mixed sizes drawn from a seeded sequence,
                  after the pool holds POOL_BLOCKS cached free blocks of mixed
                  sizes across STREAMS streams (the state devalloc's
                  BenchmarkHitPath builds)
  host_pair       CachingHostAllocator allocate + free (DataPtr destructor)

Prints one JSON object per line: {"peer", "case", "value", "unit", ...}.
Run: /opt/torch/.venv/bin/python bench/peers/torch_alloc.py [--quick]
"""
import argparse
import json
import os
import sys
import tempfile

import torch
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#include <ATen/core/CachingHostAllocator.h>
#include <chrono>
#include <cmath>
#include <vector>

namespace ca = c10::cuda::CUDACachingAllocator;

static uint64_t next(uint64_t& s) {  // xorshift64*, the same generator as bench/peers/sizes.go
  s ^= s >> 12; s ^= s << 25; s ^= s >> 27;
  return s * 2685821657736338717ULL;
}

static size_t logsize(uint64_t& s, double lo, double hi) {
  double u = (double)(next(s) >> 11) / 9007199254740992.0;
  return (size_t)(lo * std::pow(hi / lo, u));
}

static double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
}

double device_warm(int64_t size, int64_t iters) {
  auto stream = c10::cuda::getCurrentCUDAStream();
  for (int i = 0; i < 1000; i++) ca::raw_delete(ca::raw_alloc_with_stream(size, stream));
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iters; i++) ca::raw_delete(ca::raw_alloc_with_stream(size, stream));
  return since(t0) / iters;
}

double device_pool(int64_t blocks, int64_t nstreams, double lo, double hi, int64_t iters, int64_t seed) {
  std::vector<c10::cuda::CUDAStream> streams;
  for (int64_t i = 0; i < nstreams; i++) streams.push_back(c10::cuda::getStreamFromPool(false));
  uint64_t s = (uint64_t)seed;
  std::vector<void*> ptrs;
  for (int64_t i = 0; i < blocks; i++)
    ptrs.push_back(ca::raw_alloc_with_stream(logsize(s, lo, hi), streams[i % nstreams]));
  for (void* p : ptrs) ca::raw_delete(p);
  std::vector<size_t> sizes(4096);
  for (auto& z : sizes) z = logsize(s, lo, hi);
  for (int64_t i = 0; i < 4096; i++)
    ca::raw_delete(ca::raw_alloc_with_stream(sizes[i], streams[i % nstreams]));
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iters; i++)
    ca::raw_delete(ca::raw_alloc_with_stream(sizes[i & 4095], streams[i % nstreams]));
  return since(t0) / iters;
}

double host_pair(int64_t size, int64_t iters) {
  auto* a = at::getHostAllocator(at::kCUDA);
  for (int i = 0; i < 100; i++) { auto d = a->allocate(size); }
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iters; i++) { auto d = a->allocate(size); }
  return since(t0) / iters;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("device_warm", &device_warm);
  m.def("device_pool", &device_pool);
  m.def("host_pair", &host_pair);
}
"""


def emit(case, value, unit, **kw):
    rec = {"peer": "torch", "version": torch.__version__, "device": torch.cuda.get_device_name(0),
           "case": case, "value": value, "unit": unit}
    rec.update(kw)
    print(json.dumps(rec), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--pool-blocks", type=int, default=10240)
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--min", type=float, default=512)
    ap.add_argument("--max", type=float, default=2 << 20)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"peer": "torch", "error": "no CUDA device"}))
        return 1
    build = os.environ.get("ACCELKIT_PEER_BUILD", os.path.join(tempfile.gettempdir(), "accelkit-peers"))
    os.makedirs(build, exist_ok=True)
    ext = load_inline(name="accelkit_torch_alloc", cpp_sources=CPP, with_cuda=True,
                      extra_cflags=["-O2"], build_directory=build, verbose=False)
    torch.cuda.init()
    iters = 20000 if args.quick else 200000
    for size in (512, 64 << 10, 2 << 20, 20 << 20):
        emit("device_warm", ext.device_warm(size, iters), "ns/pair", size=size)
    emit("device_pool", ext.device_pool(args.pool_blocks, args.streams, args.min, args.max, iters, args.seed),
         "ns/pair", pool_blocks=args.pool_blocks, streams=args.streams, min=args.min, max=args.max, seed=args.seed)
    for size in (64 << 10, 1 << 20, 64 << 20):
        emit("host_pair", ext.host_pair(size, iters), "ns/pair", size=size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
