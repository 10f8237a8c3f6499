#!/usr/bin/env bash
# KV admission under a KV cache too small for the offered concurrency: `gpufrac serve --model tiny
# --device cpu` with a 1296 KiB budget (81 blocks of 16 tokens: one 768-token sequence and part
# of a second) driven by `gpufrac bench` at ISL 512 / OSL 256, 16 measured requests, c = 1 and 4,
# once per --kv-admission rule, RUNS times (c = 1 and 4 alternate within each run, so drift hits
# both alike). Prints one row per (rule, c): output tok/s (median of the runs, then min-max),
# TTFT p50 (median), the engine's preemptions over all runs (its /metrics counter, after minus
# before) and per request, and per rule the ratio of the c=4 to the c=1 median. A performance
# reference, not a CI test: run it on a quiet machine.
#
#   tests/engine/kv_admission_bench.sh [BUILD_DIR [RUNS]]     (defaults: build, 1)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="$(cd "${1:-$root/build}" && pwd)/gpufrac"
runs="${2:-1}"
work="$(mktemp -d "${TMPDIR:-/tmp}/kv-admission.XXXXXX")"
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT

port_of() { sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$1" | head -1; }
preemptions() { curl -s "http://127.0.0.1:$1/metrics" | awk '/^vllm:num_preemptions_total/ {print $2}'; }

for rule in reserve optimistic; do
  log="$work/serve-$rule.log"
  "$bin" serve --model tiny --device cpu --port 0 --max-model-len 1024 --memory-budget 1296K \
    --kv-admission "$rule" > "$log" 2>&1 &
  server=$!
  for _ in $(seq 100); do port="$(port_of "$log")"; [ -n "$port" ] && break; sleep 0.1; done
  [ -n "$port" ] || { cat "$log"; exit 1; }
  for run in $(seq "$runs"); do
    for c in 1 4; do
      before="$(preemptions "$port")"
      "$bin" bench --target "http://127.0.0.1:$port=tiny" --isl 512 --osl 256 \
        --concurrency "$c" --requests 16 --warmup 0 --out "$work/$rule-$run" --no-progress > /dev/null
      after="$(preemptions "$port")"
      echo "$rule $c $work/$rule-$run/dedicated-m1/c$c/summary.json $((after - before))" >> "$work/points"
    done
  done
  kill "$server"; wait "$server" 2>/dev/null || true; server=""
done

python3 - "$work/points" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    rule, c, path, pre = line.split()
    s = json.load(open(path))["aggregate"]
    row = rows.setdefault((rule, int(c)), {"tok": [], "ttft": [], "pre": 0, "requests": 0})
    row["tok"].append(s["output_token_throughput"])
    row["ttft"].append(s["ttft_ms_p50"])
    row["pre"] += int(pre)
    row["requests"] += 16
print("| kv-admission | c | runs | output tok/s (median) | min-max | TTFT p50 ms (median) "
      "| preemptions | per request |")
print("|---|---:|---:|---:|---|---:|---:|---:|")
for (rule, c), r in rows.items():
    print(f"| {rule} | {c} | {len(r['tok'])} | {statistics.median(r['tok']):.1f} | "
          f"{min(r['tok']):.1f}-{max(r['tok']):.1f} | {statistics.median(r['ttft']):.0f} | "
          f"{r['pre']} | {r['pre'] / r['requests']:.2f} |")
print()
for rule in dict.fromkeys(rule for rule, _ in rows):
    ratio = statistics.median(rows[(rule, 4)]["tok"]) / statistics.median(rows[(rule, 1)]["tok"])
    print(f"{rule}: c=4 / c=1 output tok/s (medians) = {ratio:.3f}")
PY
