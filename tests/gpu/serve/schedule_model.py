#!/usr/bin/env python3
"""Predicts `gpufrac bench` at ISL 2048 / OSL 256 against `gpufrac serve --device cuda` (qwen3-4b)
from the step times measured on the H200, for several scheduler policies: a closed-loop
simulation of the engine's scheduler (src/engine/scheduler.cpp: decodes first, then prompt
chunks FCFS within the step's token budget) with a cost model of each step.

Step cost (ms), from one `gpufrac_cuda_bench --json` run (--bench; default: the run that
docs/results/engine-h200.md describes, H200, driver 580.159.04, commit 1f2ecaa, 2026-12-04):
- pure decode step of D sequences: the decode graph of D's bucket (measured at context 2048);
- step with P prompt tokens and D decodes (eager, no graph): linear layers at D + P tokens
  (cuBLASLt alone: the benchmark's per-shape table times the 36 layers) + the decode step's
  non-linear part (graph - its linear layers)
  + P x the prompt's non-linear cost per token (attention, norms, RoPE, SiLU: what the prefill
  of 2048 tokens spends outside the linear layers and the eager overhead) + the eager launch
  overhead; with decodes, plus a constant that makes the measured served step (the bench's
  --mixed step: 31 decodes at context 2048 + a 481-token chunk, or --served-step-ms) come out
  exact (since version 8 the decodes' attention runs beside the chunk's, which the sum above
  does not know; a larger chunk's served step scaled so is an assumption: at 1024 tokens the
  model predicts more tok/s than 512 and the serve measured fewer, src/engine/cuda/NOTES.md);
- plus the engine's CPU time per step where it is not overlapped with the GPU (version 3: the
  ITL at c=1 minus the batch-1 graph; version 4: 0, steps are pipelined).
The last line asks which served-step time the serve's policy (512 tokens with decodes) needs
for 3,600 output tok/s at c=32 (issue 15), all else as measured.
Run: python3 tests/gpu/serve/schedule_model.py [--bench engine-bench.json]  (prints one table;
--help for the knobs)
"""
import argparse
import bisect
import collections
import json
import os
import statistics

DEFAULT_BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "docs",
                             "results", "raw", "2026-12-04-h200", "engine-1f2ecaa", "engine",
                             "engine-bench.json")
BUCKETS = [1, 2, 4, 8, 16, 24, 32, 48, 64]
LAYERS = 36  # qwen3-4b
ISL, OSL = 2048, 256


class Measured:
    """The step times of one gpufrac_cuda_bench --json run of qwen3-4b (its headline variant)."""

    def __init__(self, path):
        try:
            with open(path) as f:
                run = json.load(f)
        except (OSError, ValueError) as e:
            raise SystemExit(f"schedule_model: cannot read {path}: {e}")
        if run["model"] != "qwen3-4b" or run["prefill"]["tokens"] != ISL or "mixed_step" not in run:
            raise SystemExit(f"schedule_model: {path} is not a qwen3-4b run with --prefill {ISL} "
                             "and --mixed")
        self.decode_graph_ms = {row["batch"]: row["graph_gpu_ms"] for row in run["decode"]}
        per_tokens = collections.defaultdict(float)
        for shape in run["gemm_shapes"]:
            per_tokens[shape["m"]] += shape["cublaslt_ms"]
        # cuBLASLt alone for all linear layers, ms by token count.
        self.linear_ms = sorted((m, LAYERS * ms) for m, ms in per_tokens.items())
        self.prefill_ms = run["prefill"]["wall_ms"]  # forward() wall time of one prompt
        mixed = run["mixed_step"]
        self.served_step = (mixed["decodes"], mixed["chunk_tokens"])
        self.served_step_ms = mixed["gpu_ms"]

    def decode_step_ms(self, decodes):
        """The decode graph of the bucket that holds `decodes` sequences."""
        bucket = next(b for b in BUCKETS if b >= decodes)
        if bucket in self.decode_graph_ms:
            return self.decode_graph_ms[bucket]
        return interpolate(sorted(self.decode_graph_ms.items()), bucket)


def interpolate(points, x):
    xs = [p[0] for p in points]
    i = min(max(bisect.bisect_left(xs, x), 1), len(points) - 1)
    (x0, y0), (x1, y1) = points[i - 1], points[i]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


class Model:
    def __init__(self, measured, eager_ms, cpu_ms, served_step_ms=None):
        self.measured = measured
        self.eager_ms = eager_ms
        self.cpu_ms = cpu_ms
        linear = interpolate(measured.linear_ms, ISL)
        self.prompt_ms_per_token = (measured.prefill_ms - linear - eager_ms) / ISL
        self.served_correction_ms = 0.0
        if served_step_ms is not None:
            self.served_correction_ms = served_step_ms - self.gpu_ms(*measured.served_step)

    def gpu_ms(self, decodes, prompt_tokens):
        m = self.measured
        if prompt_tokens == 0:
            return m.decode_step_ms(decodes)
        decode_rest = (m.decode_step_ms(decodes) - interpolate(m.linear_ms, decodes)
                       if decodes else 0)
        return (interpolate(m.linear_ms, decodes + prompt_tokens) + decode_rest +
                prompt_tokens * self.prompt_ms_per_token + self.eager_ms)

    def step_ms(self, decodes, prompt_tokens):
        correction = self.served_correction_ms if decodes and prompt_tokens else 0.0
        return self.gpu_ms(decodes, prompt_tokens) + correction + self.cpu_ms


def simulate(model, concurrency, budget, budget_with_decodes):
    """One measured run point of `gpufrac bench` (src/bench: closed loop, max(40, 10 c) requests,
    all c clients start at once, each sends its next request when its last one ends). Returns
    (output tok/s over first request sent .. last response end, TTFT p50 ms, ITL p50 ms)."""
    requests = max(40, 10 * concurrency)
    now = 0.0
    waiting = [0.0] * concurrency  # arrival times, FCFS
    issued = concurrency
    running = []  # dicts in arrival order
    done = []
    while len(done) < requests:
        decodes = [r for r in running if r["prompt_left"] == 0]
        left = budget - len(decodes)
        if decodes and budget_with_decodes:
            left = min(left, budget_with_decodes - len(decodes))
        chunks = []
        for r in running:
            if r["prompt_left"] > 0 and left > 0:
                n = min(r["prompt_left"], left)
                chunks.append((r, n))
                left -= n
        while waiting and left > 0:
            r = {"arrival": waiting.pop(0), "prompt_left": ISL, "generated": 0, "first": None}
            running.append(r)
            n = min(ISL, left)
            chunks.append((r, n))
            left -= n
        now += model.step_ms(len(decodes), sum(n for _, n in chunks))
        for r, n in chunks:
            r["prompt_left"] -= n
            if r["prompt_left"] == 0:
                r["first"] = now
                r["generated"] = 1
        for r in decodes:
            r["generated"] += 1
        for r in [r for r in running if r["generated"] >= OSL]:
            running.remove(r)
            done.append((r["arrival"], r["first"], now))
            if issued < requests:
                waiting.append(now)
                issued += 1
    ttft = statistics.median(first - arrival for arrival, first, _ in done)
    itl = statistics.median((end - first) / (OSL - 1) for _, first, end in done)
    return OSL * requests / now * 1e3, ttft, itl


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bench", default=DEFAULT_BENCH,
                        help="a gpufrac_cuda_bench --json of qwen3-4b with --prefill 2048 and "
                             "--mixed (default: the run engine-h200.md describes)")
    parser.add_argument("--eager-ms", type=float, default=0.5,
                        help="launch overhead of a step run without a graph (ms)")
    parser.add_argument("--cpu-ms-v3", type=float, default=3.47 - 3.252,
                        help="engine CPU per step not overlapped in version 3 (ms)")
    parser.add_argument("--served-step-ms", type=float,
                        help="GPU ms of the served step (default: the bench's --mixed step)")
    args = parser.parse_args()
    measured = Measured(args.bench)
    served_ms = args.served_step_ms if args.served_step_ms is not None else measured.served_step_ms
    served = Model(measured, args.eager_ms, 0.0, served_ms)
    policies = [
        ("v3: budget 8192, serial CPU", Model(measured, args.eager_ms, args.cpu_ms_v3), 8192, 0),
        ("v4: budget 8192, pipelined", Model(measured, args.eager_ms, 0.0), 8192, 0),
        ("v4: + 2048 with decodes", Model(measured, args.eager_ms, 0.0), 8192, 2048),
        ("v4: + 1024 with decodes", Model(measured, args.eager_ms, 0.0), 8192, 1024),
        ("v4: + 512 with decodes", Model(measured, args.eager_ms, 0.0), 8192, 512),
        ("v4: + 288 with decodes", Model(measured, args.eager_ms, 0.0), 8192, 288),
        ("fitted: + 512 with decodes", served, 8192, 512),
        ("fitted: + 1024 with decodes", served, 8192, 1024),
        ("fitted: + 384 with decodes", served, 8192, 384),
        ("fitted: + 288 with decodes", served, 8192, 288),
    ]
    print(f"priced with {os.path.relpath(args.bench)}")
    print(f"eager overhead {args.eager_ms} ms/step, v3 CPU {args.cpu_ms_v3:.3f} ms/step; "
          "c: output tok/s, TTFT p50 ms, ITL p50 ms")
    for name, model, budget, with_decodes in policies:
        cells = []
        for c in (1, 2, 4, 8, 16, 32):
            tok, ttft, itl = simulate(model, c, budget, with_decodes)
            cells.append(f"c={c}: {tok:5.0f} {ttft:6.1f} {itl:5.2f}")
        print(f"{name:30s} " + " | ".join(cells))
    print(f"served step fitted: {served.gpu_ms(*measured.served_step):.2f} ms summed, "
          f"{served_ms:.2f} measured (correction {served.served_correction_ms:+.2f} ms)")
    for tenths in range(int(served_ms * 10), 0, -1):
        tok, _, _ = simulate(Model(measured, args.eager_ms, 0.0, tenths / 10), 32, 8192, 512)
        if tok >= 3600:
            print(f"c=32 at 512 with decodes reaches 3,600 tok/s ({tok:.0f}) with a served step "
                  f"of {tenths / 10:.1f} ms, the rest as measured")
            break
    else:
        print("c=32 at 512 with decodes: no served-step time reaches 3,600 tok/s")


if __name__ == "__main__":
    main()
