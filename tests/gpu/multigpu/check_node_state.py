#!/usr/bin/env python3
"""Checks one node's state.json (RUN_DIR/state.json, which `gpufrac up` writes and keeps after
`gpufrac down`) against the layout of a multi-GPU arm: GPUs 0 .. N-1, M models on each, and with
--daemons one MPS daemon per GPU (fractions) — running with that GPU's UUID and a pipe directory
of its own — else none (dedicated, timeslice). Prints one line saying what it found; exits 0 when
the node matches, 1 when not (2 on bad arguments or an unreadable file).

  check_node_state.py STATE --gpus N --models-per-gpu M [--daemons]
"""
import argparse
import collections
import json
import sys


def problems_of(state, gpus, models_per_gpu, daemons):
    """What differs from the expected layout, as short phrases; empty when nothing does."""
    problems = []
    expected = [str(g) for g in range(gpus)]
    uuids = {d["id"]: d["uuid"] for d in state.get("devices", [])}
    if sorted(uuids, key=int) != expected:
        problems.append(f"devices {sorted(uuids, key=int)}, not {expected}")
    per_gpu = collections.Counter(m["gpu"] for m in state.get("models", []))
    if {g: per_gpu.get(g, 0) for g in expected} != {g: models_per_gpu for g in expected} or set(per_gpu) - set(expected):
        problems.append(f"models per GPU {dict(sorted(per_gpu.items(), key=lambda i: int(i[0])))}, "
                        f"not {models_per_gpu} on each")
    for m in state.get("models", []):
        if m.get("gpu_uuid") != uuids.get(m["gpu"]):
            problems.append(f"model {m['name']} on GPU {m['gpu']} has UUID {m.get('gpu_uuid')}")
    mps = state.get("mps", [])
    if not daemons:
        if mps:
            problems.append(f"{len(mps)} MPS daemon(s), not none")
        return problems
    if sorted((d["gpu"] for d in mps), key=int) != expected:
        problems.append(f"MPS daemons of GPUs {sorted((d['gpu'] for d in mps), key=int)}, not one for each of {expected}")
    for d in mps:
        if d.get("uuid") != uuids.get(d["gpu"]):
            problems.append(f"GPU {d['gpu']}'s daemon runs with UUID {d.get('uuid')}")
    if len({d["pipe_dir"] for d in mps}) != len(mps):
        problems.append("two daemons share a pipe directory")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("state")
    ap.add_argument("--gpus", type=int, required=True)
    ap.add_argument("--models-per-gpu", type=int, required=True)
    ap.add_argument("--daemons", action="store_true")
    a = ap.parse_args()
    try:
        with open(a.state) as f:
            state = json.load(f)
    except (OSError, ValueError) as e:
        print(f"{a.state}: cannot read the node state ({e})")
        return 2
    problems = problems_of(state, a.gpus, a.models_per_gpu, a.daemons)
    if problems:
        print(f"{state.get('name', '?')}: " + "; ".join(problems))
        return 1
    daemons = f"{a.gpus} MPS daemons, each its GPU's UUID and pipe directory" if a.daemons else "no MPS daemon"
    print(f"{state.get('name', '?')}: {a.models_per_gpu} model(s) on each of {a.gpus} GPUs, {daemons}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
