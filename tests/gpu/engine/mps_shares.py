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


def share_rows(out, shares):
    """Per share: a dict of share, sms (None if unreported), ms, gbps, per_sm (None without
    sms), or of share and error (the exception's class name) when its files are missing."""
    rows = []
    for share in shares:
        try:
            with open(os.path.join(out, f"mps-share-{share}.json")) as f:
                bench = json.load(f)
            with open(os.path.join(out, f"mps_share_{share}.log")) as f:
                sms = re.search(r"(\d+) SMs usable", f.read())
            row = next(r for r in bench["decode"] if r["batch"] == 1)
        except (OSError, ValueError, KeyError, StopIteration) as error:
            rows.append({"share": share, "error": error.__class__.__name__})
            continue
        ms = row["graph_gpu_ms"]
        gbps = row["bytes"] / (ms * 1e-3) / 1e9
        sm_count = int(sms.group(1)) if sms else None
        rows.append({"share": share, "sms": sm_count, "ms": ms, "gbps": gbps,
                     "per_sm": gbps / sm_count if sm_count else None})
    return rows


def table_lines(rows):
    """share_rows' rows as a markdown table."""
    lines = ["| MPS share | SMs usable | decode batch 1, GPU ms | GB/s read | GB/s per SM |",
             "|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['share']}% | — | — | — | — |  ({r['error']})")
            continue
        per_sm = f"{r['per_sm']:.1f}" if r["per_sm"] is not None else "—"
        sms = r["sms"] if r["sms"] else "—"
        lines.append(f"| {r['share']}% | {sms} | {r['ms']:.3f} | {r['gbps']:.0f} | {per_sm} |")
    return lines


def main():
    if len(sys.argv) < 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    rows = share_rows(sys.argv[1], sys.argv[2:])
    print("\n".join(table_lines(rows)))
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
