#!/usr/bin/env python3
"""Decode at batch 1 under MPS shares, as one markdown table (tests/gpu/engine/run, step 4).

Usage: mps_shares.py SUITE_OUT SHARE...   (SHARE as in CUDA_MPS_ACTIVE_THREAD_PERCENTAGE)

Reads SUITE_OUT/mps-share-<share>.json (gpufrac_cuda_bench --json) and the SM count the runner
reported in SUITE_OUT/mps_share_<share>.log ("... N SMs usable ..."); prints per share the SMs,
the CUDA-graph decode step's GPU time (median), the bytes it read (weights + KV) per second, and
that rate per SM. Exits 1 if a share's files are missing or hold no batch-1 decode point.
"""
import json
import os
import re
import sys


def main():
    if len(sys.argv) < 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    out, shares = sys.argv[1], sys.argv[2:]
    print("| MPS share | SMs usable | decode batch 1, GPU ms | GB/s read | GB/s per SM |")
    print("|---:|---:|---:|---:|---:|")
    missing = 0
    for share in shares:
        try:
            with open(os.path.join(out, f"mps-share-{share}.json")) as f:
                bench = json.load(f)
            with open(os.path.join(out, f"mps_share_{share}.log")) as f:
                sms = re.search(r"(\d+) SMs usable", f.read())
            row = next(r for r in bench["decode"] if r["batch"] == 1)
        except (OSError, ValueError, KeyError, StopIteration) as error:
            print(f"| {share}% | — | — | — | — |  ({error.__class__.__name__})")
            missing += 1
            continue
        ms = row["graph_gpu_ms"]
        gbps = row["bytes"] / (ms * 1e-3) / 1e9
        sm_count = int(sms.group(1)) if sms else None
        per_sm = f"{gbps / sm_count:.1f}" if sm_count else "—"
        print(f"| {share}% | {sm_count if sm_count else '—'} | {ms:.3f} | {gbps:.0f} | {per_sm} |")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
