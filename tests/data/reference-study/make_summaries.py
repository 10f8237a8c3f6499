#!/usr/bin/env python3
"""Writes the reference study's per-arm numbers as gpufrac summary.json files.

Every number below is typed from docs/reference-study.md (the study's
text). TTFT and ITL p50 are stored as printed. The output throughput of a run (all 8 GPUs) is
printed three times, each rounded: as tok/s per GPU (1 decimal), as node tok/s in the appendix
(integer) and, for baseline and fractions, through the cost table (tok/s for 16 models as an
integer, $/1M to 4 decimals). For each run this script intersects the intervals those printed
numbers allow and stores the appendix integer when it lies strictly inside (no rounding tie),
otherwise the nearest value on a 0.1 grid strictly inside. It then checks that the stored values
reproduce every printed number, the % and change columns included, and writes
<arm>-m<models_per_gpu>/c<c>/summary.json next to this file.

Run: python3 tests/data/reference-study/make_summaries.py   (re-run only if the study changes)
"""
import json
import math
import os

CONCURRENCY = [1, 2, 4, 8, 16, 32]
GPUS = 8
PRICE = 1.00  # per node-hour
GPUS_PER_NODE = 8
MODELS = 16

# arm -> (models per GPU, study name)
ARMS = {"dedicated": (1, "baseline"), "timeslice": (2, "HAMi"), "fractions": (2, "fractions")}

# "Per-arm raw rows": TTFT p50 ms / ITL p50 ms / tok/s per GPU, c = 1..32.
RAW = {
    "dedicated": [(103.6, 8.58, 111.4), (48.6, 8.61, 227.5), (49.0, 9.13, 429.1),
                  (331.5, 11.00, 671.2), (431.0, 15.56, 929.2), (481.8, 26.20, 1141.8)],
    "timeslice": [(216, 19.0, 101.1), (374, 19.3, 193.0), (571, 21.1, 343.9),
                  (731, 25.2, 572.0), (777, 35.6, 831.4), (1702, 55.9, 943.0)],
    "fractions": [(185, 13.2, 144.4), (347, 14.1, 259.2), (549, 15.4, 456.1),
                  (739, 19.3, 722.8), (786, 28.9, 1003.4), (2159, 39.2, 1132.4)],
}
# "Appendix (node tok/s at equal c per model)": vanilla/HAMi/fractions.
APPENDIX = {"dedicated": [891, 1820, 3433, 5370, 7434, 9134],
            "timeslice": [809, 1544, 2751, 4576, 6651, 7544],
            "fractions": [1155, 2074, 3649, 5782, 8027, 9059]}
# "Cost of serving 16 models": baseline tok/s (2 nodes), baseline $/1M, fractions tok/s
# (1 node), fractions $/1M, change %.
COST = [(1782, 0.3118, 1155, 0.2405, -22.9), (3640, 0.1526, 2074, 0.1339, -12.2),
        (6866, 0.0809, 3649, 0.0761, -5.9), (10740, 0.0517, 5782, 0.0480, -7.1),
        (14868, 0.0374, 8027, 0.0346, -7.4), (18268, 0.0304, 9059, 0.0307, 0.8)]
# Throughput table "% of baseline": shared at c vs baseline at 2c, c = 1..16.
PERCENT = {"timeslice": [44.5, 45.0, 51.2, 61.6, 72.8],
           "fractions": [63.5, 60.4, 68.0, 77.8, 87.9]}


def around(printed, decimals):
    """The open interval of values that print as `printed` at `decimals` decimals."""
    half = 0.5 * 10.0 ** -decimals
    return (printed - half, printed + half)


def intersect(a, b):
    return (max(a[0], b[0]), min(a[1], b[1]))


def nodes(arm):
    return math.ceil(MODELS / (GPUS_PER_NODE * ARMS[arm][0]))


def scale(arm):  # tok/s of the measured run -> tok/s serving MODELS models
    return MODELS / (GPUS * ARMS[arm][0])


def cost_per_million(arm, total_tok_s):
    return PRICE * nodes(arm) / (total_tok_s * scale(arm) * 3600) * 1e6


def allowed_interval(arm, i):
    iv = intersect(around(APPENDIX[arm][i], 0), tuple(GPUS * x for x in around(RAW[arm][i][2], 1)))
    cost_columns = {"dedicated": (0, 1), "fractions": (2, 3)}
    if arm in cost_columns:
        tok_col, usd_col = cost_columns[arm]
        iv = intersect(iv, tuple(x / scale(arm) for x in around(COST[i][tok_col], 0)))
        lo, hi = around(COST[i][usd_col], 4)  # $/1M falls as tok/s rises
        k = PRICE * nodes(arm) * 1e6 / (3600 * scale(arm))
        iv = intersect(iv, (k / hi, k / lo))
    assert iv[0] < iv[1], (arm, i, iv)
    return iv


def pick(arm, i):
    lo, hi = allowed_interval(arm, i)
    n = APPENDIX[arm][i]
    if lo < n < hi:
        return float(n), (lo, hi)
    candidates = [round(n + d / 10, 1) for d in range(-5, 6)]
    inside = [x for x in candidates if lo < x < hi]
    return min(inside, key=lambda x: abs(x - n)), (lo, hi)


def fmt(value, decimals):
    return f"{value:.{decimals}f}"


def check(stored):
    for arm in ARMS:
        for i, c in enumerate(CONCURRENCY):
            t = stored[arm][i]
            assert fmt(t / GPUS, 1) == fmt(RAW[arm][i][2], 1), (arm, c)
            assert fmt(t, 0) == str(APPENDIX[arm][i]), (arm, c)
    for arm, column in PERCENT.items():
        for i, printed in enumerate(column):
            assert fmt(100 * stored[arm][i] / stored["dedicated"][i + 1], 1) == fmt(printed, 1)
    for i, (b_tok, b_usd, f_tok, f_usd, change) in enumerate(COST):
        b, f = stored["dedicated"][i], stored["fractions"][i]
        assert fmt(b * scale("dedicated"), 0) == str(b_tok)
        assert fmt(f * scale("fractions"), 0) == str(f_tok)
        b_cost, f_cost = cost_per_million("dedicated", b), cost_per_million("fractions", f)
        assert fmt(b_cost, 4) == fmt(b_usd, 4) and fmt(f_cost, 4) == fmt(f_usd, 4), i
        assert fmt(100 * (f_cost / b_cost - 1), 1) == fmt(change, 1), i


def summary(arm, c, total_tok_s, ttft, itl):
    m = ARMS[arm][0]
    return {
        "schema": "gpufrac.summary/1",
        "config": {
            "arm": arm, "models_per_gpu": m, "gpus": GPUS, "load": "closed",
            "concurrency": c, "request_rate": None, "isl": 2048, "osl": 256,
            "isl_stddev": 0, "osl_stddev": 0, "requests": max(40, 10 * c),
            "warmup": min(16, 2 * c), "endpoint": "chat", "seed": 0,
        },
        "machine": {"gpu": "NVIDIA A100-SXM4-40GB"},
        "targets": [],
        "aggregate": {"output_token_throughput": total_tok_s, "ttft_ms_p50": ttft,
                      "itl_ms_p50": itl},
    }


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    stored, notes = {}, []
    for arm in ARMS:
        stored[arm] = []
        for i, c in enumerate(CONCURRENCY):
            value, (lo, hi) = pick(arm, i)
            stored[arm].append(value)
            if value != APPENDIX[arm][i]:
                notes.append(f"{arm} c{c}: stored {value} (appendix {APPENDIX[arm][i]} is a "
                             f"rounding tie or outside; allowed ({lo:.4f}, {hi:.4f}))")
    check(stored)
    for arm, (m, _) in ARMS.items():
        for i, c in enumerate(CONCURRENCY):
            ttft, itl, _ = RAW[arm][i]
            directory = os.path.join(here, f"{arm}-m{m}", f"c{c}")
            os.makedirs(directory, exist_ok=True)
            with open(os.path.join(directory, "summary.json"), "w") as f:
                json.dump(summary(arm, c, stored[arm][i], ttft, itl), f, indent=2)
                f.write("\n")
    for arm in ARMS:
        print(arm, stored[arm])
    print("\n".join(notes))


if __name__ == "__main__":
    main()
