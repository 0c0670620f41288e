"""cuda.core's kernel path with its program cache, for accbench -peers.

The warm path accbench's kernels suite measures, done the cuda.core way,
on a cache hit, then ObjectCode.get_kernel (which loads the module), per
call, median of 5 batches:

- where Program.compile takes cache= (recent cuda.core):
  Program(source, "c++", options).compile("cubin", cache=FileStreamProgramCache);
- else (cuda.core 1.2.0 may lack it) the escape hatch its documentation
  gives for ProgramCacheResource: make_program_cache_key(code=,
  code_type="c++", options=, target_type="cubin"), cache.get(key), and
  ObjectCode.from_cubin(data) (on a miss: compile, then cache[key] = obj).

The emitted record names the path that ran ("path"). The source is the
reference kernels (driver/drivertest.KernelSource), which accbench writes
beside this script.

Run: /opt/torch/.venv/bin/python bench/peers/cudacore_kernels.py KERNELS.cu [--quick]
"""
import argparse
import inspect
import json
import statistics
import sys
import tempfile
import time

import cuda.core as cc
from cuda.core import Device, ObjectCode, Program, ProgramOptions
from cuda.core.utils import FileStreamProgramCache, make_program_cache_key

PATH_COMPILE_CACHE = "Program.compile(cache=)"
PATH_KEY_LOOKUP = "make_program_cache_key + cache.get + ObjectCode.from_cubin"


def emit(case, value, unit, **kw):
    rec = {"peer": "cuda.core", "version": getattr(cc, "__version__", "?"), "case": case,
           "value": value, "unit": unit}
    rec.update(kw)
    print(json.dumps(rec), flush=True)


def per_op_us(fn, n):
    batches = []
    for _ in range(5):
        t0 = time.perf_counter()
        for i in range(n):
            fn(i)
        batches.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(batches)


def compile_takes_cache():
    """True or False when Program.compile's signature says; None when a
    compiled (Cython) method has no signature to read."""
    try:
        return "cache" in inspect.signature(Program.compile).parameters
    except (TypeError, ValueError):
        return None


def load_via_compile(src, opts, cache):
    return Program(src, "c++", options=opts).compile("cubin", cache=cache)


def load_via_key(src, opts, cache):
    key = make_program_cache_key(code=src, code_type="c++", options=opts, target_type="cubin")
    data = cache.get(key)
    if data is None:
        obj = Program(src, "c++", options=opts).compile("cubin")
        try:
            cache[key] = obj  # the cache extracts bytes(obj.code)
        except TypeError:
            cache[key] = bytes(obj.code)  # a cache that takes bytes only
        return obj
    if isinstance(data, ObjectCode):  # a cache that stores ObjectCode itself
        return data
    return ObjectCode.from_cubin(bytes(data))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("source")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n = 40 if args.quick else 400
    with open(args.source) as f:
        src = f.read()
    dev = Device()
    dev.set_current()
    opts = ProgramOptions(arch="sm_" + "".join(str(x) for x in dev.compute_capability))
    with tempfile.TemporaryDirectory() as d:
        cache = FileStreamProgramCache(d)
        # The miss: compile and store, untimed (accbench's cold compile is
        # its own row). It also settles which path this cuda.core has.
        load, path = load_via_key, PATH_KEY_LOOKUP
        takes = compile_takes_cache()
        if takes is not False:
            try:
                load_via_compile(src, opts, cache).get_kernel("accelkit_vector_add")
                load, path = load_via_compile, PATH_COMPILE_CACHE
            except TypeError as e:
                if takes or "cache" not in str(e):
                    raise
        if load is load_via_key:
            load_via_key(src, opts, cache).get_kernel("accelkit_vector_add")
        time.sleep(2.1)  # the same steady state as accbench's warm path

        def warm(i):
            load(src, opts, cache).get_kernel("accelkit_vector_add")

        emit("kernels_warm_path", per_op_us(warm, n), "us/op", path=path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
