#!/usr/bin/env python3
"""A/B of two builds of the CUDA engine, as the engine's notes measure every kept change: the
`gpufrac_cuda_bench` of build A and of build B run in alternating processes (A, B, A, B, ...,
so that the GPU's clock and power drifts hit both alike), with the same arguments; then, per
point, every round's value and the ratio of the medians B / A.

Points (GPU ms, from each run's --json): the decode graph of every --batches entry (the first
--variants entry, the bench's headline), the prefill back to back and after idle, and the
serving step of --mixed when given.

Run (on the GPU machine):
  python3 tests/gpu/engine/ab_bench.py --a BUILD_A --b BUILD_B [--rounds 2] [--out DIR]
      [--env-a VAR=VALUE]... [--env-b VAR=VALUE]... [--test NAME]... -- BENCH_ARGS...
e.g. `... -- --model qwen3-4b --batches 1,32 --context 2048 --prefill 2048 --mixed 31,481
--variants fast`. BUILD_x: a build directory (its tests/engine/gpufrac_cuda_bench), the bench
executable itself, or a `scripts/gpu-check --pack` archive (*.tar.xz, unpacked first). Each run's
JSON and log go to --out (default: a new temporary directory). --test NAME runs build B's test
program NAME (beside its bench, e.g. cuda_fast_path_test) first, in B's environment, and times
nothing when one fails. Exit status: 0 when every run succeeded, 1 when a test or a run failed
(its log's last lines are printed), 2 on a usage error.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile

BENCH = os.path.join("tests", "engine", "gpufrac_cuda_bench")


def bench_path(build, scratch, side):
    """The bench executable of BUILD (a directory, the executable, or a --pack archive)."""
    if build.endswith(".tar.xz"):
        dest = os.path.join(scratch, "build-" + side)
        with tarfile.open(build) as archive:
            if hasattr(tarfile, "data_filter"):  # Python 3.12+ asks for a filter
                archive.extractall(dest, filter="data")
            else:
                archive.extractall(dest)
        roots = [os.path.join(dest, d) for d in os.listdir(dest)]
        build = roots[0] if len(roots) == 1 and os.path.isdir(roots[0]) else dest
    path = os.path.join(build, BENCH) if os.path.isdir(build) else build
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise SystemExit(f"ab_bench: no executable {path} (give a build directory, the bench "
                         "or a scripts/gpu-check --pack archive)")
    return path


def environment(assignments, flag):
    env = dict(os.environ)
    for item in assignments:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SystemExit(f"ab_bench: {flag} takes VAR=VALUE, got '{item}'")
        env[name] = value
    return env


def points(result):
    """(name, GPU ms) of one bench JSON, in the order the table prints them."""
    out = [(f"decode batch {row['batch']}", row["graph_gpu_ms"]) for row in result["decode"]]
    prefill = result["prefill"]
    out.append((f"prefill {prefill['tokens']}", prefill["gpu_ms"]))
    if "after_idle" in prefill:
        out.append((f"prefill {prefill['tokens']} after idle", prefill["after_idle"]["gpu_ms"]))
    if "mixed_step" in result:
        mixed = result["mixed_step"]
        out.append((f"serving step {mixed['decodes']}+{mixed['chunk_tokens']}", mixed["gpu_ms"]))
    return out


def run_test(path, env, log_path):
    """Runs one GoogleTest program; True when it passed."""
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        print(f"ab_bench: no test program {path}", file=sys.stderr)
        return False
    with open(log_path, "w") as log:
        status = subprocess.run([path, "--gtest_brief=1"], env=env, stdout=log,
                                stderr=subprocess.STDOUT).returncode
    with open(log_path) as log:
        lines = log.readlines()
    if status != 0:
        failed = [line for line in lines if "FAILED" in line or "Failure" in line][:10]
        print(f"ab_bench: {os.path.basename(path)} failed ({log_path}):\n" + "".join(failed),
              file=sys.stderr)
        return False
    print(f"{os.path.basename(path)}: passed")
    return True


def run_bench(path, args, env, json_path, log_path):
    with open(log_path, "w") as log:
        status = subprocess.run([path, *args, "--json", json_path], env=env, stdout=log,
                                stderr=subprocess.STDOUT).returncode
    if status != 0:
        with open(log_path) as log:
            tail = log.readlines()[-5:]
        print(f"ab_bench: {path} exited {status}; {log_path} ends:\n" + "".join(tail),
              file=sys.stderr)
        return None
    with open(json_path) as f:
        return json.load(f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     usage="%(prog)s --a BUILD_A --b BUILD_B [options] -- ARGS")
    parser.add_argument("--a", required=True, help="build A (the baseline)")
    parser.add_argument("--b", required=True, help="build B (the change)")
    parser.add_argument("--rounds", type=int, default=2, help="processes per build (default 2)")
    parser.add_argument("--env-a", action="append", default=[], metavar="VAR=VALUE")
    parser.add_argument("--env-b", action="append", default=[], metavar="VAR=VALUE")
    parser.add_argument("--out", help="directory for each run's JSON and log")
    parser.add_argument("--test", action="append", default=[], metavar="NAME",
                        help="a test program of build B to pass before timing (repeatable)")
    parser.add_argument("bench_args", nargs=argparse.REMAINDER,
                        help="-- then gpufrac_cuda_bench's arguments (not --json)")
    args = parser.parse_args()
    bench_args = args.bench_args[1:] if args.bench_args[:1] == ["--"] else args.bench_args
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if "--json" in bench_args:
        parser.error("--json is set per run by ab_bench")
    out = args.out or tempfile.mkdtemp(prefix="ab-bench.")
    os.makedirs(out, exist_ok=True)
    sides = {"A": (bench_path(args.a, out, "a"), environment(args.env_a, "--env-a")),
             "B": (bench_path(args.b, out, "b"), environment(args.env_b, "--env-b"))}
    b_bench, b_env = sides["B"]
    for name in args.test:
        test = os.path.join(os.path.dirname(b_bench), name)
        if not run_test(test, b_env, os.path.join(out, f"test-{name}.log")):
            return 1
    values = {"A": {}, "B": {}}  # side -> point -> [ms per round]
    order = []
    for round_index in range(1, args.rounds + 1):
        for side, (path, env) in sides.items():
            stem = os.path.join(out, f"{side.lower()}-{round_index}")
            result = run_bench(path, bench_args, env, stem + ".json", stem + ".log")
            if result is None:
                return 1
            for name, ms in points(result):
                if name not in order:
                    order.append(name)
                values[side].setdefault(name, []).append(ms)
    print(f"A: {args.a}\nB: {args.b}\nbench: {' '.join(bench_args)}\n"
          f"GPU ms per round, A then B; B / A of the medians (runs in {out})")
    width = max(len(name) for name in order)
    for name in order:
        a, b = values["A"].get(name, []), values["B"].get(name, [])
        ratio = f"{statistics.median(b) / statistics.median(a):.3f}" if a and b else "-"
        cells = " / ".join(f"{v:.3f}" for v in a) + "  ->  " + " / ".join(f"{v:.3f}" for v in b)
        print(f"{name:<{width}}  {cells}  B/A {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
