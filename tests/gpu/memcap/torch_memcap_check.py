#!/usr/bin/env python3
"""GPU check of libgpufrac_memcap.so with PyTorch (needs an NVIDIA GPU and torch; ~30 s).

Usage: python3 tests/gpu/memcap/torch_memcap_check.py PATH/TO/libgpufrac_memcap.so [--cap-gib 4]

Runs a fresh Python process per allocator configuration, each with the shim in LD_PRELOAD and a
cap of --cap-gib on GPU 0, and checks in each:
  - torch.cuda.mem_get_info() reports the cap as total, and free = cap before anything is allocated;
  - torch.cuda.get_device_properties(0).total_memory is the cap;
  - an allocation within the cap succeeds and lowers free by its size;
  - an allocation past the cap raises torch.cuda.OutOfMemoryError;
  - after freeing (empty_cache), the memory can be allocated again.
Configurations: the default caching allocator (cuMemAlloc), expandable segments
(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: cuMemCreate/cuMemMap) and the stream-ordered
backend (backend:cudaMallocAsync: cuMemAllocAsync). One more process runs under the shim with no
cap and checks that it reports the GPU's real total.
Prints one PASS/FAIL line per check; exits 1 if any check failed, 2 on a usage error.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

GIB = 1 << 30
MIB = 1 << 20
# Slack for the driver's and torch's rounding (2 MiB pages, 20 MiB expandable segments).
SLACK = 64 * MIB

CONFIGURATIONS = [
    ("default allocator", None),
    ("expandable segments", "expandable_segments:True"),
    ("cudaMallocAsync backend", "backend:cudaMallocAsync"),
]


def child(cap):
    """Runs inside the capped process: prints one JSON object per check."""
    import torch

    def report(name, ok, detail):
        print(json.dumps({"check": name, "ok": bool(ok), "detail": detail}), flush=True)

    free, total = torch.cuda.mem_get_info(0)
    if cap is None:
        real = torch.cuda.get_device_properties(0).total_memory
        report("without a cap, mem_get_info total is the GPU's", total == real,
               f"total={total} device={real}")
        return
    report("mem_get_info total is the cap", total == cap, f"total={total} cap={cap}")
    report("mem_get_info free is the cap before allocating", cap - SLACK <= free <= cap,
           f"free={free} cap={cap}")
    props_total = torch.cuda.get_device_properties(0).total_memory
    report("device properties total_memory is the cap", props_total == cap,
           f"total_memory={props_total} cap={cap}")

    within = cap // 2
    try:
        block = torch.empty(within, dtype=torch.uint8, device="cuda")
        block.fill_(1)
        torch.cuda.synchronize()
        free_after, _ = torch.cuda.mem_get_info(0)
        report("an allocation within the cap succeeds and lowers free by its size",
               cap - within - SLACK <= free_after <= cap - within,
               f"allocated={within} free={free_after}")
    except Exception as error:  # noqa: BLE001 - any failure here is the finding
        report("an allocation within the cap succeeds and lowers free by its size", False,
               repr(error))
        return

    past = cap - within + 256 * MIB
    try:
        extra = torch.empty(past, dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()
        report("an allocation past the cap raises OutOfMemoryError", False,
               f"allocated {past} more bytes on top of {within} under a cap of {cap}")
        del extra
    except torch.cuda.OutOfMemoryError as error:
        report("an allocation past the cap raises OutOfMemoryError", True,
               str(error).splitlines()[0][:160])

    del block
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    again = cap - 512 * MIB
    try:
        block = torch.empty(again, dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()
        report("freed memory can be allocated again", True, f"allocated={again}")
    except Exception as error:  # noqa: BLE001
        report("freed memory can be allocated again", False, repr(error))


def run_child(shim, cap, alloc_conf, state_dir, tenant):
    env = dict(os.environ)
    env["LD_PRELOAD"] = shim + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    env["GPUFRAC_MEMCAP_STATE_DIR"] = state_dir
    env["GPUFRAC_MEMCAP_TENANT"] = tenant
    env.pop("GPUFRAC_MEMCAP_BYTES", None)
    if cap is not None:
        env["GPUFRAC_MEMCAP_BYTES"] = f"0={cap}"
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if alloc_conf:
        env["PYTORCH_CUDA_ALLOC_CONF"] = alloc_conf
    env.setdefault("CUDA_VISIBLE_DEVICES", "0")
    command = [sys.executable, os.path.abspath(__file__), "--child",
               "--cap-bytes", str(cap if cap is not None else -1)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    results = []
    for line in done.stdout.splitlines():
        try:
            results.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        results.append({"check": "the process exits cleanly", "ok": False,
                        "detail": f"exit {done.returncode}: {tail[:200]}"})
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shim", nargs="?", help="path to libgpufrac_memcap.so")
    parser.add_argument("--cap-gib", type=float, default=4.0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cap-bytes", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(None if args.cap_bytes < 0 else args.cap_bytes)
        return 0
    if not args.shim or not os.path.isfile(args.shim):
        parser.error("give the path of the built libgpufrac_memcap.so")
    shim = os.path.abspath(args.shim)
    cap = int(args.cap_gib * GIB)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="gpufrac-memcap-gpu-") as state_dir:
        runs = [(name, conf, cap) for name, conf in CONFIGURATIONS]
        runs.append(("no cap", None, None))
        for index, (name, conf, run_cap) in enumerate(runs):
            for result in run_child(shim, run_cap, conf, state_dir, f"gpucheck-{index}"):
                verdict = "PASS" if result["ok"] else "FAIL"
                failed += 0 if result["ok"] else 1
                print(f"{verdict} memcap [{name}] {result['check']}: {result['detail']}",
                      flush=True)
    print(f"{'FAIL' if failed else 'PASS'} memcap torch checks: {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
