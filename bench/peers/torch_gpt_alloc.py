"""A small GPT trained on PyTorch's caching allocator and on devalloc (issue 40).

The sequence length changes every step (drawn from a seeded sequence), the
workload that fragments a caching allocator. --compare runs two processes
on the same seed, one per allocator:

  native    PyTorch's own CUDACachingAllocator
  accelkit  libaccelkit_alloc.so through
            torch.cuda.memory.CUDAPluggableAllocator (devalloc/capi; build
            it with `go tool task capi`)

and reports, for each, peak reserved over peak allocated (PyTorch's
max_memory_* for native; the library's own statistics for accelkit, since
PyTorch keeps none for a pluggable allocator), steps per second after a
warm-up, and the loss curve; the curves must agree within float noise
(deterministic algorithms on, same seed). In the native process it also
times, in C++ (torch.utils.cpp_extension.load_inline), PyTorch's
raw_alloc_with_stream + raw_delete pair beside the library's
accelkit_torch_alloc + accelkit_torch_free pair of the same size on the
same stream. Goals: peak reserved at most 0.8x PyTorch's, steps per second
at least 0.97x, the library's pair at most PyTorch's.

Run: /opt/torch/.venv/bin/python bench/peers/torch_gpt_alloc.py --compare \
         --lib out/capi/libaccelkit_alloc.so [--steps 200]
Prints one JSON object per line: {"peer", "case", "value", "unit", ...}.
"""
import argparse
import ctypes
import json
import math
import os
import random
import subprocess
import sys
import time


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--allocator", choices=["native", "accelkit"], default="native")
    p.add_argument("--compare", action="store_true", help="run native, then accelkit, and compare")
    p.add_argument("--lib", default="out/capi/libaccelkit_alloc.so")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--pair-size", type=int, default=1 << 20)
    return p.parse_args()


def emit(case, value, unit, **kw):
    print(json.dumps(dict(peer="torch_gpt", case=case, value=value, unit=unit, **kw)), flush=True)


PAIR_CPP = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#include <dlfcn.h>
#include <chrono>
#include <stdexcept>

namespace ca = c10::cuda::CUDACachingAllocator;
typedef void *(*alloc_fn)(size_t, int, cudaStream_t);
typedef void (*free_fn)(void *, size_t, int, cudaStream_t);

double native_pair_ns(int64_t size, int64_t n) {
  auto s = c10::cuda::getCurrentCUDAStream().stream();
  ca::raw_delete(ca::raw_alloc_with_stream(size, s));  // warm
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < n; i++) ca::raw_delete(ca::raw_alloc_with_stream(size, s));
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n;
}

double lib_pair_ns(const std::string &path, int64_t size, int64_t n) {
  void *h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) throw std::runtime_error(dlerror());
  auto a = (alloc_fn)dlsym(h, "accelkit_torch_alloc");
  auto f = (free_fn)dlsym(h, "accelkit_torch_free");
  if (!a || !f) throw std::runtime_error("library lacks accelkit_torch_alloc/free");
  int dev = c10::cuda::current_device();
  auto s = c10::cuda::getCurrentCUDAStream().stream();
  f(a(size, dev, s), size, dev, s);  // warm: opens the driver, fills the cache
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < n; i++) f(a(size, dev, s), size, dev, s);
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("native_pair_ns", &native_pair_ns);
  m.def("lib_pair_ns", &lib_pair_ns);
}
"""


def train(args):
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    lib = None
    if args.allocator == "accelkit":
        path = os.path.abspath(args.lib)
        alloc = torch.cuda.memory.CUDAPluggableAllocator(path, "accelkit_torch_alloc", "accelkit_torch_free")
        torch.cuda.memory.change_current_allocator(alloc)  # before any CUDA allocation
        lib = ctypes.CDLL(path)
        lib.accelkit_stats_json.restype = ctypes.c_long
        lib.accelkit_stats_json.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]

    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    dev = torch.device("cuda")
    V, D, H, L, B = 2048, 384, 6, 6, 16

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
            self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, H, D // H).permute(2, 0, 3, 1, 4)
            att = (q @ k.transpose(-2, -1)) / math.sqrt(D // H)
            att = att.masked_fill(torch.ones(t, t, device=x.device, dtype=torch.bool).triu(1), float("-inf"))
            y = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, D)
            x = x + self.proj(y)
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(V, D), nn.Embedding(1024, D)
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.ln, self.head = nn.LayerNorm(D), nn.Linear(D, V, bias=False)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln(x))

    model = GPT().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    rng = random.Random(args.seed)
    gen = torch.Generator(device="cpu").manual_seed(args.seed)
    losses, t0 = [], None
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        T = rng.choice([64, 128, 192, 256, 384, 512, 768, 1024])
        # A learnable sequence: each token is the previous plus a per-row stride.
        start = torch.randint(0, V, (B, 1), generator=gen)
        stride = torch.randint(1, 7, (B, 1), generator=gen)
        seq = (start + stride * torch.arange(T + 1)) % V
        x, y = seq[:, :-1].to(dev, non_blocking=True), seq[:, 1:].to(dev, non_blocking=True)
        loss = F.cross_entropy(model(x).view(-1, V), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    torch.cuda.synchronize()
    sps = args.steps / (time.perf_counter() - t0)

    if lib is None:
        peak_alloc, peak_res = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
    else:
        n = lib.accelkit_stats_json(torch.cuda.current_device(), None, 0)
        buf = ctypes.create_string_buffer(n + 1)
        lib.accelkit_stats_json(torch.cuda.current_device(), buf, n + 1)
        st = json.loads(buf.value)
        peak_alloc, peak_res = st["allocated_bytes.all.peak"], st["reserved_bytes.all.peak"]
    out = dict(allocator=args.allocator, steps_per_s=sps, peak_allocated=peak_alloc,
               peak_reserved=peak_res, ratio=peak_res / peak_alloc, losses=losses)
    if lib is None:
        from torch.utils.cpp_extension import load_inline
        ext = load_inline("torch_gpt_pair", cpp_sources=PAIR_CPP, with_cuda=True, extra_ldflags=["-ldl"])
        out["native_pair_ns"] = ext.native_pair_ns(args.pair_size, 100000)
        out["lib_pair_ns"] = ext.lib_pair_ns(os.path.abspath(args.lib), args.pair_size, 100000)
    print("RESULT " + json.dumps(out), flush=True)


def compare(args):
    res = {}
    for name in ("native", "accelkit"):
        cmd = [sys.executable, __file__, "--allocator", name, "--lib", args.lib, "--steps", str(args.steps),
               "--warmup", str(args.warmup), "--seed", str(args.seed), "--pair-size", str(args.pair_size)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        res[name] = json.loads(next(l for l in out.splitlines() if l.startswith("RESULT "))[7:])
    n, a = res["native"], res["accelkit"]
    for name, r in res.items():
        emit("peak_reserved_over_allocated", r["ratio"], "x", allocator=name,
             peak_reserved=r["peak_reserved"], peak_allocated=r["peak_allocated"])
        emit("steps_per_second", r["steps_per_s"], "steps/s", allocator=name)
        emit("loss_curve", r["losses"][-1], "loss", allocator=name, curve=r["losses"])
    drift = max(abs(x - y) for x, y in zip(n["losses"], a["losses"]))
    emit("loss_max_abs_diff", drift, "loss", agree=drift <= 1e-4 * max(1.0, max(n["losses"])))
    emit("peak_reserved_vs_native", a["peak_reserved"] / n["peak_reserved"], "x", goal="<= 0.8")
    emit("steps_per_second_vs_native", a["steps_per_s"] / n["steps_per_s"], "x", goal=">= 0.97")
    emit("alloc_free_pair", n["lib_pair_ns"], "ns", native_ns=n["native_pair_ns"], size=args.pair_size,
         goal="<= native", met=n["lib_pair_ns"] <= n["native_pair_ns"])


if __name__ == "__main__":
    a = parse()
    compare(a) if a.compare else train(a)
