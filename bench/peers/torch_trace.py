"""Replays an RMM-format allocation trace through PyTorch's CUDA caching
allocator, for accbench -peers: the same trace file accbench replays through
devalloc, so fragmentation (peak reserved / peak allocated) compares side by
side. Each allocator configuration runs in its own process, since
PYTORCH_CUDA_ALLOC_CONF is read once.

Run: /opt/torch/.venv/bin/python bench/peers/torch_trace.py TRACE.csv [TRACE.csv ...]
"""
import csv
import json
import os
import subprocess
import sys
import time

CONFIGS = {"default": "", "expandable": "expandable_segments:True"}


def replay(path):
    import torch
    torch.cuda.init()
    torch.cuda.reset_peak_memory_stats()
    live = {}
    allocs = failed = 0
    t0 = time.perf_counter()
    with open(path, newline="") as f:
        rows = csv.reader(f)
        header = next(rows)
        if [h.strip() for h in header] != ["Thread", "Time", "Action", "Pointer", "Size", "Stream"]:
            raise SystemExit(f"{path}: not an RMM logging CSV (header {header})")
        for row in rows:
            if not row:
                continue
            action, ptr, size = row[2].strip(), row[3].strip(), int(row[4])
            if action == "allocate":
                try:
                    live[ptr] = torch.cuda.caching_allocator_alloc(size)
                    allocs += 1
                except torch.OutOfMemoryError:
                    failed += 1
            elif action in ("free", "deallocate"):
                p = live.pop(ptr, None)
                if p is not None:
                    torch.cuda.caching_allocator_delete(p)
    elapsed = time.perf_counter() - t0
    for p in live.values():
        torch.cuda.caching_allocator_delete(p)
    st = torch.cuda.memory_stats()
    reserved, allocated = st["reserved_bytes.all.peak"], st["allocated_bytes.all.peak"]
    return {"allocs": allocs, "failed": failed, "seconds": elapsed,
            "reserved_peak": reserved, "allocated_peak": allocated,
            "ratio": reserved / allocated if allocated else 0.0,
            "segments_peak": st.get("segment.all.peak", 0),
            "num_alloc_retries": st.get("num_alloc_retries", 0),
            "num_ooms": st.get("num_ooms", 0)}


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(replay(sys.argv[2])))
        return 0
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    import torch
    for path in sys.argv[1:]:
        for name, conf in CONFIGS.items():
            env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=conf)
            out = subprocess.run([sys.executable, __file__, "--child", path], env=env,
                                 capture_output=True, text=True)
            if out.returncode != 0:
                print(json.dumps({"peer": "torch", "case": "trace", "trace": path, "config": name,
                                  "error": out.stderr.strip()[-2000:]}), flush=True)
                continue
            rec = {"peer": "torch", "version": torch.__version__, "case": "trace",
                   "trace": os.path.basename(path), "config": name}
            rec.update(json.loads(out.stdout.strip().splitlines()[-1]))
            print(json.dumps(rec), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
