#!/usr/bin/env python3
"""Writes docs/results/engine-h200.md from one GPU run of tests/gpu/engine/run (the engine
benchmark's JSON plus the test logs of the same run) and, with --serve-bench, of
tests/gpu/serve/run (`gpufrac bench` against `gpufrac serve --device cuda`: its bench result
directory). Every number in the document comes from those files; the GPU, driver, date and
command are recorded with them. --commit, --driver and --date re-render a kept run (default:
$GPUFRAC_BUILD_COMMIT, which scripts/gpu-check sets to the build's commit, else this checkout's
HEAD; nvidia-smi; today).

  results_doc.py --bench engine-bench.json --suite-dir DIR [--serve-bench DIR] --out engine-h200.md
"""
import argparse
import datetime
import glob
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mps_shares  # noqa: E402  (beside this file)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serve"))
import bench_points  # noqa: E402  (tests/gpu/serve)

# The engine's targets on an H200 (qwen3-4b bf16, medians).
DECODE_TARGET_MS = 2.4      # decode step, batch 1
DECODE_B32_TARGET_MS = 5.0  # decode step, batch 32 at context 2048
PREFILL_TARGET_MS = 28.0    # one 2048-token prompt
TTFT_TARGET_MS = 30.0       # gpufrac bench, ISL 2048, c=1
ITL_C1_TARGET_MS = 2.5      # gpufrac bench, ISL 2048 / OSL 256, c=1
C32_TARGET_TOK_S = 3600.0   # output tok/s at c=32 ...
C32_ITL_TARGET_MS = 12.0    # ... with ITL p50 at most this
MPS_12_5_TARGET_MS = 8.0    # decode step, batch 1, under a 12.5% MPS share


def against(value, target, unit, at_most=True, digits=2):
    """'met' or 'missed by X unit (Y%)' for value against an upper (or lower) bound."""
    over = value - target if at_most else target - value
    if over <= 0:
        return "**met**"
    return f"**missed** by {over:,.{digits}f} {unit} ({100 * over / target:.0f}%)"


def serve_section(points, w):
    """The `gpufrac bench` table and its targets from the concurrency points (bench_points)."""
    w("\n## `gpufrac bench` against `gpufrac serve --device cuda` (ISL 2048, OSL 256)\n")
    w("Suite `tests/gpu/serve/run` of the same gpu-check: `gpufrac serve --model qwen3-4b "
      "--device cuda --max-num-seqs 32 --max-model-len 4096`, driven closed loop at each "
      "concurrency with the study's request and warmup counts.\n")
    w("| c | requests | failed | output tok/s | TTFT p50 (ms) | ITL p50 (ms) | inter-chunk gap p50 (ms) |")
    w("|---:|---:|---:|---:|---:|---:|---:|")
    for p in points:
        w(f"| {p.concurrency} | {p.requests} | {p.failed} | {p.tok_s:.1f} | {p.ttft_p50_ms:.2f} | "
          f"{p.itl_p50_ms:.2f} | {p.gap_p50_ms:.2f} |")
    by_c = {p.concurrency: p for p in points}
    w("\nTargets:")
    if 1 in by_c:
        c1 = by_c[1]
        w(f"- TTFT p50 at c=1 <= {TTFT_TARGET_MS:.0f} ms: {c1.ttft_p50_ms:.2f} ms, "
          f"{against(c1.ttft_p50_ms, TTFT_TARGET_MS, 'ms')}.")
        w(f"- ITL p50 at c=1 <= {ITL_C1_TARGET_MS} ms: {c1.itl_p50_ms:.2f} ms, "
          f"{against(c1.itl_p50_ms, ITL_C1_TARGET_MS, 'ms')}; the decode step above is its floor.")
    if 32 in by_c:
        c32 = by_c[32]
        w(f"- c=32: >= {C32_TARGET_TOK_S:,.0f} output tok/s: {c32.tok_s:,.0f}, "
          f"{against(c32.tok_s, C32_TARGET_TOK_S, 'tok/s', at_most=False, digits=0)}; with ITL p50 <= "
          f"{C32_ITL_TARGET_MS:.0f} ms: {c32.itl_p50_ms:.2f} ms, "
          f"{against(c32.itl_p50_ms, C32_ITL_TARGET_MS, 'ms')}. A 32-request cycle is 32 prefills "
          "(the prefill above) plus ~250 decode steps near batch 32 (the batch-32 step above; "
          "`python3 tests/gpu/serve/schedule_model.py` models the mix).")


def mps_section(suite_dir, w):
    """The MPS-shares table (mps_shares.py), if the run has one."""
    shares = sorted((re.fullmatch(r"mps-share-(.+)\.json", os.path.basename(p)).group(1)
                     for p in glob.glob(os.path.join(suite_dir, "mps-share-*.json"))),
                    key=lambda share: -float(share))
    if not shares:
        return
    rows = mps_shares.share_rows(suite_dir, shares)
    w("\n## Decode at batch 1 under MPS shares\n")
    w("`gpufrac_cuda_bench --batches 1 --context 2048` under one `nvidia-cuda-mps-control` daemon "
      "with `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` set per run: what an engine packed with others "
      "gets from its share of the SMs (bytes read: weights + KV).\n")
    for line in mps_shares.table_lines(rows):
        w(line)
    row = next((r for r in rows if r["share"] == "12.5" and "error" not in r), None)
    if row:
        w(f"\nTarget: batch 1 under a 12.5% share <= {MPS_12_5_TARGET_MS:.0f} ms: {row['ms']:.3f} ms, "
          f"{against(row['ms'], MPS_12_5_TARGET_MS, 'ms', digits=3)}.")


def command_output(args):
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def lines_matching(suite_dir, pattern):
    found = []
    for path in sorted(glob.glob(os.path.join(suite_dir, "*.log"))):
        with open(path, errors="replace") as f:
            found += [line.rstrip() for line in f if re.match(pattern, line)]
    return found


def verdicts(suite_dir):
    rows = []
    summary = os.path.join(suite_dir, "summary.txt")
    if os.path.exists(summary):
        with open(summary) as f:
            rows = [line.rstrip() for line in f if re.search(r"\b(PASS|FAIL)\b", line)]
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", required=True)
    parser.add_argument("--suite-dir", required=True)
    parser.add_argument("--serve-bench", help="tests/gpu/serve/run's bench result directory")
    parser.add_argument("--out", required=True)
    parser.add_argument("--commit")
    parser.add_argument("--driver")
    parser.add_argument("--date")
    a = parser.parse_args()
    with open(a.bench) as f:
        b = json.load(f)
    driver = a.driver or command_output(
        ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    commit = a.commit or os.environ.get("GPUFRAC_BUILD_COMMIT") or command_output(
        ["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "--short",
         "HEAD"]) or "unknown"
    today = a.date or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    bw = b["copy_bandwidth_bytes_per_s"]
    rate = b["gemm_rate_flops_per_s"]
    out = []
    w = out.append
    w("# The CUDA engine on an H200: decode and prefill against the floors\n")
    w(f"Measured {today} on {b['gpu']} ({b['sm_count_usable']} SMs usable), driver "
      f"{driver or 'unknown'}, commit {commit}, model preset `{b['model']}` (bf16, "
      f"{b['weight_bytes'] / 1e9:.2f} GB of weights on the GPU).")
    w("Command: `scripts/gpu-check` (suite `tests/gpu/engine/run`, which runs "
      "`gpufrac_cuda_bench --model qwen3-4b --batches 1,2,4,8,16,32,64 --context 2048 "
      "--prefill 2048`" + (", and suite `tests/gpu/serve/run`" if a.serve_bench else "") +
      "); this file is written by `tests/gpu/engine/results_doc.py` from that run's output.\n")
    w(f"Ceilings measured in the same process: device copy **{bw / 1e12:.2f} TB/s** (bytes read + "
      f"written), bf16 GEMM **{rate / 1e12:.0f} TFLOP/s** (cuBLASLt, {b['gemm_rate_shape']}, "
      "random data).\n")

    w("## Decode step (context 2048 per sequence)\n")
    w("GPU time of one CUDA-graph replay (median of the timed replays), `forward()` wall time "
      "(packing, one upload, the graph, one download of the token ids), and the bandwidth floor: "
      "(weights + the batch's KV bytes) / measured copy bandwidth.\n")
    w("| batch | graph GPU ms | forward() ms | floor ms | floor at 4.3 TB/s | floor / GPU |")
    w("|---|---|---|---|---|---|")
    for r in b["decode"]:
        w(f"| {r['batch']} | {r['graph_gpu_ms']:.3f} | {r['forward_wall_ms']:.3f} | "
          f"{r['floor_ms']:.3f} | {r['floor_ms_4_3tbps']:.3f} | "
          f"{100 * r['floor_ms'] / r['graph_gpu_ms']:.0f}% |")
    b1 = next((r for r in b["decode"] if r["batch"] == 1), None)
    b32 = next((r for r in b["decode"] if r["batch"] == 32), None)
    if b1:
        w(f"\nTargets: batch 1 <= {DECODE_TARGET_MS} ms: {b1['graph_gpu_ms']:.3f} ms, "
          f"{against(b1['graph_gpu_ms'], DECODE_TARGET_MS, 'ms', digits=3)}.")
    if b32:
        w(f"Batch 32 <= {DECODE_B32_TARGET_MS} ms: {b32['graph_gpu_ms']:.3f} ms, "
          f"{against(b32['graph_gpu_ms'], DECODE_B32_TARGET_MS, 'ms', digits=3)}.")
    shapes = {}
    for g in b["gemm_shapes"]:
        shapes.setdefault(g["m"], {})[g["shape"]] = g["cublaslt_ms"]
    layers = {"qwen3-4b": 36, "qwen3-0.6b": 28}.get(b["model"])
    if layers:
        w("\nWhere the time goes (cuBLASLt per-layer GEMM times, measured separately at the same "
          "token count, times the layers; lm_head not included):\n")
        for r in b["decode"]:
            if r["batch"] in shapes and len(shapes[r["batch"]]) == 4:
                gemm = layers * sum(shapes[r["batch"]].values())
                w(f"- batch {r['batch']}: linear layers {gemm:.3f} ms of {r['graph_gpu_ms']:.3f} ms; "
                  f"the rest (attention, norms, RoPE, lm_head, sampling, gaps) "
                  f"{r['graph_gpu_ms'] - gemm:.3f} ms")

    p = b["prefill"]
    w("\n## Prefill of one 2048-token prompt\n")
    w(f"GPU {p['gpu_ms']:.2f} ms, `forward()` wall {p['wall_ms']:.2f} ms. FLOP floor "
      f"({p['flops'] / 1e12:.2f} TFLOP: linear layers for every token, causal attention, logits "
      f"of the last token) at the measured GEMM rate: {p['floor_ms']:.2f} ms "
      f"({100 * p['floor_ms'] / p['gpu_ms']:.0f}% of it reached); at 790 TFLOP/s: "
      f"{p['floor_ms_790tflops']:.2f} ms.")
    w(f"Target: <= {PREFILL_TARGET_MS:.0f} ms: {p['gpu_ms']:.2f} ms, "
      f"{against(p['gpu_ms'], PREFILL_TARGET_MS, 'ms')}. The TTFT target (p50 <= "
      f"{TTFT_TARGET_MS:.0f} ms at ISL 2048) is measured through `gpufrac bench` against "
      "`gpufrac serve --device cuda`.")
    idle = p.get("after_idle")
    if idle:
        each = ", ".join(f"{x:.2f}" for x in p.get("gpu_ms_each", []))
        w(f"\nThe same prefill after {idle['idle_ms']} ms of idle GPU before each (as between the "
          f"prompts of a lightly loaded server): GPU {idle['gpu_ms']:.2f} ms, `forward()` wall "
          f"{idle['wall_ms']:.2f} ms; against the target: "
          f"{against(idle['gpu_ms'], PREFILL_TARGET_MS, 'ms')}. Back to back (the figure above, "
          f"each run in order: {each} ms) the prefills draw the GPU to its power limit and it "
          "lowers its clocks (nvidia-smi reports the SW power cap as the clock event reason).")

    points = [p for p in bench_points.read(a.serve_bench)
              if p.label.startswith("c")] if a.serve_bench else []
    if points:
        serve_section(points, w)
    mps_section(a.suite_dir, w)

    names = list(p.get("variants", {}).keys())
    if len(names) > 1:
        w("\n## Kernel variants in the same run (GPU ms; fast = the default kernels)\n")
        w("Variants: fast (all fast paths), serial (the fast kernels without overlapped "
          "launches), mma-flash (prompt chunks on the mma.sync flash kernel instead of the "
          "Hopper one), flash-sm-100 (prompt chunks' flash kernel on every SM beside decode rows, "
          "which wait for it; the default holds it to 50%), simple-attention (fast GEMV, simple attention), cublas (fast attention, "
          "cuBLASLt for every linear layer), simple (GPUFRAC_CUDA_SIMPLE=1).\n")
        w("| point | " + " | ".join(names) + " |")
        w("|---|" + "---|" * len(names))
        for r in b["decode"]:
            w(f"| decode batch {r['batch']} | " +
              " | ".join(f"{r['variants'][n]['graph_gpu_ms']:.3f}" for n in names) + " |")
        w(f"| prefill {p['tokens']} | " +
          " | ".join(f"{p['variants'][n]['gpu_ms']:.2f}" for n in names) + " |")
        mixed = b.get("mixed_step", {})
        if all(n in mixed.get("variants", {}) for n in names):
            w(f"| serving step: {mixed['decodes']} decodes + a {mixed['chunk_tokens']}-token "
              "chunk | " + " | ".join(f"{mixed['variants'][n]['gpu_ms']:.2f}" for n in names) + " |")

    profiles = [(f"eager decode step, batch {q['batch']}, context {q['context']}", q["stages"])
                for q in b.get("decode_profiles", [])]
    if "prefill_profile" in b:
        profiles.append((f"eager prefill of {b['prefill_profile']['tokens']} tokens",
                         b["prefill_profile"]["stages"]))
    if "mixed_step" in b:
        m = b["mixed_step"]
        profiles.append((f"eager serving step: {m['decodes']} decodes at context {m['context']} "
                         f"+ a {m['chunk_tokens']}-token prompt chunk from position "
                         f"{m['chunk_start']} (no graph, as served; timed without the events: "
                         f"{m['gpu_ms']:.2f} ms GPU)",
                         m["stages"]))
    if profiles:
        w("\n## Where the time goes: per-stage profiles (fast kernels)\n")
        w("One eager step with an event after every stage (GPU ms summed over the layers); eager "
          "launches add gaps that the decode graphs do not have.\n")
        for title, stages in profiles:
            total = sum(st["ms"] for st in stages)
            w(f"{title}: {total:.3f} ms\n")
            w("| stage | ms | share |")
            w("|---|---|---|")
            for st in stages:
                w(f"| {st['stage']} | {st['ms']:.3f} | {100 * st['ms'] / total:.1f}% |")
            w("")

    w("\n## Linear layers through cuBLASLt (ms per layer, distinct weights per layer)\n")
    w("GEMV: the weight-streaming kernel (gemv.h) at the same shape, for the token counts it "
      "serves; the runner times both at start-up and keeps the faster per shape.\n")
    w("ms: the algorithm the runner keeps from timing cuBLASLt's candidates at start-up; "
      "heuristic's first: the one cuBLASLt ranks first for the shape.\n")
    w("| shape | m | n | k | ms | heuristic's first ms | weight bytes / s | GEMV ms | GEMV / cuBLASLt | floor ms |")
    w("|---|---|---|---|---|---|---|---|---|---|")
    for g in b["gemm_shapes"]:
        gemv = (f"{g['gemv_ms']:.4f} | {g['gemv_ms'] / g['cublaslt_ms']:.2f}"
                if "gemv_ms" in g else "- | -")
        first = (f"{g['cublaslt_first_algorithm_ms']:.4f}"
                 if "cublaslt_first_algorithm_ms" in g else "-")
        w(f"| {g['shape']} | {g['m']} | {g['n']} | {g['k']} | {g['cublaslt_ms']:.4f} | {first} | "
          f"{g['cublaslt_bytes_per_s'] / 1e12:.2f} TB/s | {gemv} | {g['floor_ms']:.4f} |")

    w("\n## Correctness in the same run\n")
    for line in verdicts(a.suite_dir):
        w(f"    {line}")
    for line in lines_matching(a.suite_dir, r"^(tiny cuda vs cpu|reference |usable SMs|top-|temperature)"):
        w(f"- {line}")
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"results_doc: wrote {a.out}")


if __name__ == "__main__":
    main()
