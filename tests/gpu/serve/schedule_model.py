#!/usr/bin/env python3
"""Predicts `gpufrac bench` at ISL 2048 / OSL 256 against `gpufrac serve --device cuda` (qwen3-4b)
from the step times measured on the H200, for several scheduler policies: a closed-loop
simulation of the engine's scheduler (src/engine/scheduler.cpp: decodes first, then prompt
chunks FCFS within the step's token budget) with a cost model of each step.

Step cost (ms), from docs/results/engine-h200.md (H200, driver 580.159.04, version 11,
2026-12-04; raw: docs/results/raw/2026-12-04-h200/engine-v11/engine/engine-bench.json):
- pure decode step of D sequences: the decode graph of D's bucket (measured at context 2048);
- step with P prompt tokens and D decodes (eager, no graph): linear layers at D + P tokens
  (cuBLASLt alone: the benchmark's per-shape table times the 36 layers) + the decode step's
  non-linear part (graph - its linear layers)
  + P x the prompt's non-linear cost per token (attention, norms, RoPE, SiLU: what the 30.8 ms
  prefill of 2048 tokens spends outside the linear layers and the eager overhead) + the eager
  launch overhead; with decodes, plus a constant that makes the measured served step (31
  decodes at context 2048 + a 481-token chunk, --served-step-ms) come out exact (since version
  8 the decodes' attention runs beside the chunk's, which the sum above does not know);
- plus the engine's CPU time per step where it is not overlapped with the GPU (version 3: the
  ITL at c=1 minus the batch-1 graph; version 4: 0, steps are pipelined).
The last line asks which served-step time the serve's policy (512 tokens with decodes) needs
for 3,600 output tok/s at c=32 (issue 15), all else as measured.
Run: python3 tests/gpu/serve/schedule_model.py  (prints one table; --help for the knobs)
"""
import argparse
import bisect
import statistics

# Measured (engine-h200.md): decode graph GPU ms at context 2048, by batch bucket.
DECODE_GRAPH_MS = {1: 2.582, 2: 3.106, 4: 3.489, 8: 3.845, 16: 4.539, 32: 5.678, 64: 8.011}
BUCKETS = [1, 2, 4, 8, 16, 24, 32, 48, 64]
# cuBLASLt alone for all linear layers of Qwen3-4B (the per-shape table x 36), ms by token count.
LINEAR_MS = [(1, 2.47), (32, 2.39), (64, 2.41), (128, 2.66), (2048, 22.69)]
PREFILL_2048_MS = 30.78  # engine-h200.md, forward() wall time of one 2048-token prompt
SERVED_STEP_MS = 12.40   # engine-h200.md: 31 decodes at context 2048 + a 481-token chunk
SERVED_STEP = (31, 481)
ISL, OSL = 2048, 256


def interpolate(points, x):
    xs = [p[0] for p in points]
    i = min(max(bisect.bisect_left(xs, x), 1), len(points) - 1)
    (x0, y0), (x1, y1) = points[i - 1], points[i]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def decode_graph_ms(d):
    bucket = next(b for b in BUCKETS if b >= d)
    if bucket in DECODE_GRAPH_MS:
        return DECODE_GRAPH_MS[bucket]
    return interpolate(sorted(DECODE_GRAPH_MS.items()), bucket)


class Model:
    def __init__(self, eager_ms, cpu_ms, served_step_ms=None):
        self.eager_ms = eager_ms
        self.cpu_ms = cpu_ms
        linear = interpolate(LINEAR_MS, ISL)
        self.prompt_ms_per_token = (PREFILL_2048_MS - linear - eager_ms) / ISL
        self.served_correction_ms = 0.0
        if served_step_ms is not None:
            self.served_correction_ms = served_step_ms - self.gpu_ms(*SERVED_STEP)

    def gpu_ms(self, decodes, prompt_tokens):
        if prompt_tokens == 0:
            return decode_graph_ms(decodes)
        decode_rest = decode_graph_ms(decodes) - interpolate(LINEAR_MS, decodes) if decodes else 0
        return (interpolate(LINEAR_MS, decodes + prompt_tokens) + decode_rest +
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
    parser.add_argument("--eager-ms", type=float, default=0.5,
                        help="launch overhead of a step run without a graph (ms)")
    parser.add_argument("--cpu-ms-v3", type=float, default=3.47 - 3.252,
                        help="engine CPU per step not overlapped in version 3 (ms)")
    parser.add_argument("--served-step-ms", type=float, default=SERVED_STEP_MS,
                        help="GPU ms of the served step of 31 decodes + a 481-token chunk")
    args = parser.parse_args()
    served = Model(args.eager_ms, 0.0, args.served_step_ms)
    policies = [
        ("v3: budget 8192, serial CPU", Model(args.eager_ms, args.cpu_ms_v3), 8192, 0),
        ("v4: budget 8192, pipelined", Model(args.eager_ms, 0.0), 8192, 0),
        ("v4: + 2048 with decodes", Model(args.eager_ms, 0.0), 8192, 2048),
        ("v4: + 1024 with decodes", Model(args.eager_ms, 0.0), 8192, 1024),
        ("v4: + 512 with decodes", Model(args.eager_ms, 0.0), 8192, 512),
        ("v4: + 288 with decodes", Model(args.eager_ms, 0.0), 8192, 288),
        ("fitted: + 512 with decodes", served, 8192, 512),
        ("fitted: + 1024 with decodes", served, 8192, 1024),
        ("fitted: + 288 with decodes", served, 8192, 288),
    ]
    print(f"eager overhead {args.eager_ms} ms/step, v3 CPU {args.cpu_ms_v3:.3f} ms/step; "
          "c: output tok/s, TTFT p50 ms, ITL p50 ms")
    for name, model, budget, with_decodes in policies:
        cells = []
        for c in (1, 2, 4, 8, 16, 32):
            tok, ttft, itl = simulate(model, c, budget, with_decodes)
            cells.append(f"c={c}: {tok:5.0f} {ttft:6.1f} {itl:5.2f}")
        print(f"{name:30s} " + " | ".join(cells))
    print(f"served step fitted: {served.gpu_ms(*SERVED_STEP):.2f} ms summed, "
          f"{args.served_step_ms:.2f} measured (correction {served.served_correction_ms:+.2f} ms)")
    for tenths in range(int(args.served_step_ms * 10), 0, -1):
        tok, _, _ = simulate(Model(args.eager_ms, 0.0, tenths / 10), 32, 8192, 512)
        if tok >= 3600:
            print(f"c=32 at 512 with decodes reaches 3,600 tok/s ({tok:.0f}) with a served step "
                  f"of {tenths / 10:.1f} ms, the rest as measured")
            break
    else:
        print("c=32 at 512 with decodes: no served-step time reaches 3,600 tok/s")


if __name__ == "__main__":
    main()
