#!/usr/bin/env bash
# Tokenizer speed before and after a change, on a shared machine: builds tokenizer_bench from
# BEFORE (a commit's sources, with this working tree's tokenizer_bench.cpp so both sides measure
# the same thing) and from the working tree (in BUILD_DIR), then runs the two alternately ROUNDS
# times, so load from other processes falls on both sides. Prints each run's medians (Google
# Benchmark, 5 repetitions) with the time and the load average. Not run by CI.
#
#   tests/engine/tokenizer/tokenizer_bench_ab.sh BEFORE BUILD_DIR [ROUNDS] [BENCHMARK_ARGS...]
#   e.g. tests/engine/tokenizer/tokenizer_bench_ab.sh e5391ba build-bpe 3 --benchmark_filter=Encode
set -euo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
before=$1
build=$2
rounds=${3:-3}
shift $(($# < 3 ? $# : 3))
src=$(cd "$(dirname "$0")/../../.." && pwd)
case $build in /*) ;; *) build=$src/$build ;; esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git -C "$src" archive "$before" | tar -x -C "$work"
cp "$src/tests/engine/tokenizer/tokenizer_bench.cpp" "$work/tests/engine/tokenizer/"
cmake -S "$work" -B "$work/build" -G Ninja >/dev/null
cmake --build "$work/build" --target tokenizer_bench -j2 >/dev/null
cmake --build "$build" --target tokenizer_bench -j2 >/dev/null

for round in $(seq "$rounds"); do
  for side in before after; do
    if [ $side = before ]; then bench=$work/build/tests/engine/tokenizer_bench; else
      bench=$build/tests/engine/tokenizer_bench
    fi
    echo "== $side ($([ $side = before ] && echo "$before" || echo "working tree")), round $round," \
      "$(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    GPUFRAC_SOURCE_DIR=$src "$bench" --benchmark_repetitions=5 \
      --benchmark_report_aggregates_only=true "$@" 2>&1 | grep '_median'
  done
done
