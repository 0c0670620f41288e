"""cuda.core's program caches and key function, for accbench -peers.

Times InMemoryProgramCache and FileStreamProgramCache put / get of a 64 KiB
payload and make_program_cache_key on a 56 KB and a 1 MiB source (the cases
progcache's benchmarks run), and 1000 distinct FileStream puts.

Run: /opt/torch/.venv/bin/python bench/peers/cudacore_cache.py [--quick]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import cuda.core as cc
from cuda.core import ProgramOptions
from cuda.core.utils import FileStreamProgramCache, InMemoryProgramCache, make_program_cache_key


def emit(case, value, unit, **kw):
    rec = {"peer": "cuda.core", "version": getattr(cc, "__version__", "?"), "case": case,
           "value": value, "unit": unit}
    rec.update(kw)
    print(json.dumps(rec), flush=True)


def per_op_us(fn, n):
    # Median of 5 batches, so one slow batch (a page-cache miss, a GC) does
    # not decide the figure.
    batches = []
    for _ in range(5):
        t0 = time.perf_counter()
        for i in range(n):
            fn(i)
        batches.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(batches)


def source(size):
    body = "__global__ void k%d(float* x) { x[threadIdx.x] += %d.0f; }\n"
    out, i = [], 0
    while sum(len(s) for s in out) < size:
        out.append(body % (i, i))
        i += 1
    return "".join(out)[:size]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n = 200 if args.quick else 2000
    opts = ProgramOptions(arch="sm_90", std="c++17")
    for size in (56 * 1024, 1 << 20):
        src = source(size)
        us = per_op_us(lambda i: make_program_cache_key(code=src, code_type="c++", options=opts, target_type="cubin"),
                       max(20, n // 20))
        emit("make_program_cache_key", us, "us/op", source_bytes=size)
    payload = os.urandom(64 << 10)
    key = make_program_cache_key(code=source(1024), code_type="c++", options=opts, target_type="cubin")
    mem = InMemoryProgramCache()
    emit("inmemory_put", per_op_us(lambda i: mem.__setitem__(key, payload), n), "us/op", bytes=len(payload))
    emit("inmemory_get", per_op_us(lambda i: mem[key], n), "us/op", bytes=len(payload))
    with tempfile.TemporaryDirectory() as d:
        fs = FileStreamProgramCache(d)
        emit("filestream_put", per_op_us(lambda i: fs.__setitem__(key, payload), max(50, n // 10)), "us/op",
             bytes=len(payload))
        emit("filestream_get", per_op_us(lambda i: fs[key], n), "us/op", bytes=len(payload))
        keys = [key + i.to_bytes(4, "little") for i in range(1000)]
        t0 = time.perf_counter()
        for k in keys:
            fs[k] = payload
        emit("filestream_distinct_put", (time.perf_counter() - t0) / len(keys) * 1e6, "us/op", count=len(keys))
    return 0


if __name__ == "__main__":
    sys.exit(main())
