"""The run points of one `gpufrac bench --out` directory, for the GPU suites' scripts
(tests/gpu/serve/run, tests/gpu/engine/results_doc.py, tests/gpu/engine/ab_bench.py): each
point's summary.json (<out>/<arm>/<point>/summary.json, the point named c<N> for a concurrency or
r<R> for a request rate) read into one Point, the first target's metrics. Times in ms, throughput
in output tokens per second. Import with this file's directory on sys.path.
"""
import collections
import glob
import json
import os

Point = collections.namedtuple(
    "Point", "label concurrency requests failed tok_s ttft_p50_ms itl_p50_ms gap_p50_ms")


def read(bench_out):
    """Every run point under bench_out, concurrencies before rates, each by its value."""
    def order(path):
        label = os.path.basename(os.path.dirname(path))
        return (label[0], float(label[1:]))
    points = []
    for path in sorted(glob.glob(os.path.join(bench_out, "*", "*", "summary.json")), key=order):
        with open(path) as f:
            s = json.load(f)
        a, m = s["aggregate"], s["targets"][0]["metrics"]
        failed = a.get("failed", 0)
        points.append(Point(os.path.basename(os.path.dirname(path)), s["config"]["concurrency"],
                            a["completed"] + failed, failed, a["output_token_throughput"],
                            m["ttft_ms"]["p50"], m["itl_ms"]["p50"],
                            m["inter_chunk_gap_ms"]["p50"]))
    return points
