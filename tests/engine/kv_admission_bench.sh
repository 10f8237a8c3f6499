#!/usr/bin/env bash
# KV admission under a KV cache too small for the offered concurrency: `gpufrac serve --model tiny
# --device cpu` with a 1296 KiB budget (81 blocks of 16 tokens: one 768-token sequence and part
# of a second) driven by `gpufrac bench` at ISL 512 / OSL 256, 16 measured requests, c = 1 and 4,
# once per --kv-admission rule. Prints one row per (rule, c): output tok/s, TTFT p50 and the
# engine's preemptions (its /metrics counter, after minus before). A performance reference, not a
# CI test: run it on a quiet machine.
#
#   tests/engine/kv_admission_bench.sh [BUILD_DIR]     (default: build)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="$(cd "${1:-$root/build}" && pwd)/gpufrac"
work="$(mktemp -d "${TMPDIR:-/tmp}/kv-admission.XXXXXX")"
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT

port_of() { sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$1" | head -1; }
preemptions() { curl -s "http://127.0.0.1:$1/metrics" | awk '/^vllm:num_preemptions_total/ {print $2}'; }

printf '| kv-admission | c | output tok/s | TTFT p50 ms | ITL p50 ms | preemptions | per request |\n'
printf '|---|---:|---:|---:|---:|---:|---:|\n'
for rule in reserve optimistic; do
  log="$work/serve-$rule.log"
  "$bin" serve --model tiny --device cpu --port 0 --max-model-len 1024 --memory-budget 1296K \
    --kv-admission "$rule" > "$log" 2>&1 &
  server=$!
  for _ in $(seq 100); do port="$(port_of "$log")"; [ -n "$port" ] && break; sleep 0.1; done
  [ -n "$port" ] || { cat "$log"; exit 1; }
  for c in 1 4; do
    before="$(preemptions "$port")"
    "$bin" bench --target "http://127.0.0.1:$port=tiny" --isl 512 --osl 256 \
      --concurrency "$c" --requests 16 --warmup 0 --out "$work/$rule" --no-progress > /dev/null
    after="$(preemptions "$port")"
    python3 - "$work/$rule/dedicated-m1/c$c/summary.json" "$rule" "$c" "$((after - before))" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["aggregate"]
rule, c, pre = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
print(f"| {rule} | {c} | {s['output_token_throughput']:.1f} | {s['ttft_ms_p50']:.0f} | "
      f"{s['itl_ms_p50']:.2f} | {pre} | {pre / 16:.2f} |")
PY
  done
  kill "$server"; wait "$server" 2>/dev/null || true; server=""
done
