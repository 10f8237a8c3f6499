#!/usr/bin/env python3
"""A/B of two builds, as the engine's notes measure every kept change: the measurement of build A
and of build B run in alternating processes (A, B, A, B, ..., so that the GPU's clock and power
drifts hit both alike), with the same arguments; then, per point, every round's value and the
ratio of the medians B / A.

Two measurements:
- the engine benchmark (default): each build's `gpufrac_cuda_bench` with BENCH_ARGS and --json.
  Points (GPU ms): the decode graph of every --batches entry (the first --variants entry, the
  bench's headline), the prefill back to back and after idle, the serving step of --mixed.
- the server (--serve SERVE_ARGS): each build's `gpufrac serve SERVE_ARGS --port 0` started
  and, once /health answers, `gpufrac bench --target <it> BENCH_ARGS --out <run dir>` (the same
  build's), then the server stopped. Points per run point of the bench (c<N> or r<rate>):
  output tok/s, TTFT p50 ms, ITL p50 ms. --serve-b SERVE_ARGS_B gives build B's server other
  arguments (A/B of a serve option, with the same build as A and B).

Run (on the GPU machine):
  python3 tests/gpu/engine/ab_bench.py --a BUILD_A --b BUILD_B [--rounds 2] [--out DIR]
      [--env-a VAR=VALUE]... [--env-b VAR=VALUE]... [--test NAME]... [--serve SERVE_ARGS
      [--serve-b SERVE_ARGS_B]] -- BENCH_ARGS...
e.g. `... -- --model qwen3-4b --batches 1,32 --context 2048 --prefill 2048 --mixed 31,481
--variants fast`, or `... --serve "--model qwen3-4b --device cuda --max-num-seqs 32
--max-model-len 4096" -- --isl 2048 --osl 256 --concurrency 32` (the serve suite's commands).
BUILD_x: a build directory (its tests/engine/gpufrac_cuda_bench, or its gpufrac with --serve),
that executable itself, or a `scripts/gpu-check --pack` archive (*.tar.xz, unpacked first). Each
run's results and logs go to --out (default: a new temporary directory). --test NAME runs build
B's test program NAME (in its tests/engine, or beside the executable given) first, in B's
environment, and times nothing when one fails. Exit status: 0 when every run succeeded, 1 when
a test or a run failed (its log's last lines are printed), 2 on a usage error.
"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serve"))
import bench_points  # noqa: E402  (tests/gpu/serve)

BENCH = os.path.join("tests", "engine", "gpufrac_cuda_bench")
SERVER = "gpufrac"
TESTS = os.path.join("tests", "engine")
HEALTHY_WITHIN_S = 900  # start-up on the GPU times kernels and captures graphs


def unpacked(build, scratch, side):
    """BUILD itself, or the directory a --pack archive unpacks to."""
    if not build.endswith(".tar.xz"):
        return build
    dest = os.path.join(scratch, "build-" + side)
    with tarfile.open(build) as archive:
        if hasattr(tarfile, "data_filter"):  # Python 3.12+ asks for a filter
            archive.extractall(dest, filter="data")
        else:
            archive.extractall(dest)
    roots = [os.path.join(dest, d) for d in os.listdir(dest)]
    return roots[0] if len(roots) == 1 and os.path.isdir(roots[0]) else dest


def program_path(build, relative):
    """The executable at `relative` in BUILD (a directory), or BUILD when it is the executable."""
    path = os.path.join(build, relative) if os.path.isdir(build) else build
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise SystemExit(f"ab_bench: no executable {path} (give a build directory, the "
                         "executable or a scripts/gpu-check --pack archive)")
    return path


def test_path(build, name):
    return os.path.join(build, TESTS, name) if os.path.isdir(build) else \
        os.path.join(os.path.dirname(build), name)


def environment(assignments, flag):
    env = dict(os.environ)
    for item in assignments:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SystemExit(f"ab_bench: {flag} takes VAR=VALUE, got '{item}'")
        env[name] = value
    return env


def log_tail(path, lines=5):
    with open(path) as log:
        return "".join(log.readlines()[-lines:])


def engine_points(result):
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


def serve_points(bench_out):
    """(name, value) per run point of one `gpufrac bench --out` directory, by concurrency/rate."""
    out = []
    for p in bench_points.read(bench_out):
        out += [(f"{p.label} output tok/s", p.tok_s), (f"{p.label} TTFT p50 ms", p.ttft_p50_ms),
                (f"{p.label} ITL p50 ms", p.itl_p50_ms)]
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


def run_engine_bench(path, args, env, stem):
    """One gpufrac_cuda_bench run: its points, or None when it failed."""
    json_path, log_path = stem + ".json", stem + ".log"
    with open(log_path, "w") as log:
        status = subprocess.run([path, *args, "--json", json_path], env=env, stdout=log,
                                stderr=subprocess.STDOUT).returncode
    if status != 0:
        print(f"ab_bench: {path} exited {status}; {log_path} ends:\n" + log_tail(log_path),
              file=sys.stderr)
        return None
    with open(json_path) as f:
        return engine_points(json.load(f))


def wait_listening(server, log_path):
    """The port `gpufrac serve --port 0` listens on once /health answers, or None."""
    deadline = time.monotonic() + HEALTHY_WITHIN_S
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no http_proxy
    port = None
    while time.monotonic() < deadline and server.poll() is None:
        if port is None:
            with open(log_path) as log:
                found = re.search(r"listening on http://[^:\s]+:(\d+)", log.read())
            port = found and found.group(1)
        if port:
            try:
                with direct.open(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                    if r.status == 200:
                        return port
            except OSError:
                pass
        time.sleep(0.2)
    return None


def run_serve_bench(path, serve_args, bench_args, env, stem):
    """One server of build `path` measured by its own gpufrac bench: the points, or None."""
    serve_log, bench_log, bench_out = stem + "-serve.log", stem + "-bench.log", stem + "-bench"
    with open(serve_log, "w") as log:
        server = subprocess.Popen([path, "serve", *serve_args, "--port", "0"], env=env,
                                  stdout=log, stderr=subprocess.STDOUT)
    try:
        port = wait_listening(server, serve_log)
        if port is None:
            print(f"ab_bench: {path} serve did not become healthy; {serve_log} ends:\n" +
                  log_tail(serve_log), file=sys.stderr)
            return None
        with open(bench_log, "w") as log:
            status = subprocess.run([path, "bench", "--target", f"http://127.0.0.1:{port}",
                                     *bench_args, "--out", bench_out, "--no-progress"], env=env,
                                    stdout=log, stderr=subprocess.STDOUT).returncode
        if status != 0:
            print(f"ab_bench: {path} bench exited {status}; {bench_log} ends:\n" +
                  log_tail(bench_log), file=sys.stderr)
            return None
        return serve_points(bench_out)
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     usage="%(prog)s --a BUILD_A --b BUILD_B [options] -- ARGS")
    parser.add_argument("--a", required=True, help="build A (the baseline)")
    parser.add_argument("--b", required=True, help="build B (the change)")
    parser.add_argument("--rounds", type=int, default=2, help="processes per build (default 2)")
    parser.add_argument("--env-a", action="append", default=[], metavar="VAR=VALUE")
    parser.add_argument("--env-b", action="append", default=[], metavar="VAR=VALUE")
    parser.add_argument("--out", help="directory for each run's results and logs")
    parser.add_argument("--test", action="append", default=[], metavar="NAME",
                        help="a test program of build B to pass before timing (repeatable)")
    parser.add_argument("--serve", metavar="SERVE_ARGS",
                        help="measure gpufrac serve SERVE_ARGS with gpufrac bench ARGS instead")
    parser.add_argument("--serve-b", metavar="SERVE_ARGS_B",
                        help="with --serve: build B's server arguments (default: SERVE_ARGS)")
    parser.add_argument("bench_args", nargs=argparse.REMAINDER,
                        help="-- then gpufrac_cuda_bench's (or with --serve gpufrac bench's) "
                             "arguments")
    args = parser.parse_args()
    bench_args = args.bench_args[1:] if args.bench_args[:1] == ["--"] else args.bench_args
    serve_args = shlex.split(args.serve) if args.serve is not None else None
    if args.serve_b is not None and serve_args is None:
        parser.error("--serve-b needs --serve")
    serve_b_args = shlex.split(args.serve_b) if args.serve_b is not None else serve_args
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    per_run = ("--target", "--out") if serve_args is not None else ("--json",)
    for flag in per_run:
        if flag in bench_args:
            parser.error(f"{flag} is set per run by ab_bench")
    if serve_args is not None and "--port" in serve_args + serve_b_args:
        parser.error("--port is set per run by ab_bench")
    out = args.out or tempfile.mkdtemp(prefix="ab-bench.")
    os.makedirs(out, exist_ok=True)
    builds = {"A": unpacked(args.a, out, "a"), "B": unpacked(args.b, out, "b")}
    program = SERVER if serve_args is not None else BENCH
    sides = {"A": (program_path(builds["A"], program), environment(args.env_a, "--env-a"),
                   serve_args),
             "B": (program_path(builds["B"], program), environment(args.env_b, "--env-b"),
                   serve_b_args)}
    for name in args.test:
        test = test_path(builds["B"], name)
        if not run_test(test, sides["B"][1], os.path.join(out, f"test-{name}.log")):
            return 1
    values = {"A": {}, "B": {}}  # side -> point -> [value per round]
    order = []
    for round_index in range(1, args.rounds + 1):
        for side, (path, env, side_serve_args) in sides.items():
            stem = os.path.join(out, f"{side.lower()}-{round_index}")
            if serve_args is not None:
                points = run_serve_bench(path, side_serve_args, bench_args, env, stem)
            else:
                points = run_engine_bench(path, bench_args, env, stem)
            if points is None:
                return 1
            for name, value in points:
                if name not in order:
                    order.append(name)
                values[side].setdefault(name, []).append(value)
    if serve_args is None:
        measured = f"bench: {' '.join(bench_args)}\nGPU ms"
    elif serve_b_args == serve_args:
        measured = f"serve: {' '.join(serve_args)}\nbench: {' '.join(bench_args)}\nvalues"
    else:
        measured = (f"serve A: {' '.join(serve_args)}\nserve B: {' '.join(serve_b_args)}\n"
                    f"bench: {' '.join(bench_args)}\nvalues")
    print(f"A: {args.a}\nB: {args.b}\n{measured} per round, A then B; B / A of the medians "
          f"(runs in {out})")
    width = max(len(name) for name in order)
    for name in order:
        a, b = values["A"].get(name, []), values["B"].get(name, [])
        ratio = f"{statistics.median(b) / statistics.median(a):.3f}" if a and b else "-"
        cells = " / ".join(f"{v:.3f}" for v in a) + "  ->  " + " / ".join(f"{v:.3f}" for v in b)
        print(f"{name:<{width}}  {cells}  B/A {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
