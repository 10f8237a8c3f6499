#!/usr/bin/env python3
"""Writes docs/results/experiment-h200xN.md from one multi-GPU `gpufrac experiment` run
(tests/gpu/multigpu/run): its report's CSV tables beside the reference study's and beside our
one-GPU run's, the packing search, and a check of every point (each one a node over all N GPUs,
every model a target, every request complete). Every number comes from the files named here;
the GPU, driver, date, commit and command are recorded with them.

  results_doc.py --results DIR --study-report DIR --one-gpu DIR --command CMD --out FILE
                 [--report DIR] [--gpu-list FILE] [--driver VERSION] [--commit HASH]
                 [--raw-link PATH] [--node-check FILE] [--incomplete TEXT]

--results      the experiment's output directory (<arm>-m<m>/c<c>/summary.json, packing.json,
               report/*.csv as `gpufrac experiment` writes them)
--report       its report's directory, if not RESULTS/report (`gpufrac report` of the arms a
               stopped run finished)
--study-report `gpufrac report tests/data/reference-study --models 16 --out DIR` (the study's
               cost table; its other numbers come with our report's vs-study tables)
--one-gpu      a one-GPU experiment's output directory (report/*.csv), e.g.
               docs/results/raw/2026-11-29-h200/experiment
--gpu-list     `nvidia-smi -L` of the machine (GPU count and name); else the summaries' machine
--node-check   Markdown to include as it is (the suite's node check)
--incomplete   the run stopped before its last point: say so at the top
"""
import argparse
import csv
import glob
import json
import os
import re
import subprocess

ARMS = (("dedicated", 1), ("timeslice", 2), ("fractions", 2))


def read_csv(path):
    """{first column value: row dict} of a report CSV; {} when the file is missing."""
    if not os.path.exists(path):
        return {}
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return {}
    key = list(rows[0].keys())[0]
    return {int(float(r[key])): r for r in rows}


def number(rows, row, column):
    value = rows.get(row, {}).get(column, "")
    return float(value) if value not in ("", None) else None


def fixed(value, digits=1):
    return "—" if value is None else f"{value:.{digits}f}"


def pct(value, signed=False):
    if value is None:
        return "—"
    return f"{value:+.1f}%" if signed else f"{value:.1f}%"


def summaries(results):
    """Every point of the sweep (not the packing probes): by arm, models per GPU, then load."""
    out = []
    for path in glob.glob(os.path.join(results, "*-m*", "*", "summary.json")):
        with open(path) as f:
            out.append((os.path.relpath(path, results), json.load(f)))
    order = [arm for arm, _ in ARMS]
    return sorted(out, key=lambda p: (order.index(p[1]["config"]["arm"]), p[1]["config"]["models_per_gpu"],
                                      p[1]["config"].get("concurrency") or 0,
                                      p[1]["config"].get("request_rate") or 0))


def machine_facts(points, gpu_list, driver):
    names, count = [], 0
    if gpu_list and os.path.exists(gpu_list):
        with open(gpu_list) as f:
            lines = [l for l in f if l.startswith("GPU ")]
        count = len(lines)
        names = sorted({re.sub(r"^GPU \d+: (.*?) \(UUID.*$", r"\1", l.strip()) for l in lines})
    for _, s in points:
        m = s.get("machine", {})
        if m.get("gpu") and m["gpu"] not in names:
            names.append(m["gpu"])
        driver = driver or m.get("driver")
    starts = sorted(s["start_time"] for _, s in points if s.get("start_time"))
    ends = sorted(s["end_time"] for _, s in points if s.get("end_time"))
    return {"names": ", ".join(names) or "unknown GPU", "listed": count, "driver": driver or "unknown",
            "start": starts[0] if starts else "?", "end": ends[-1] if ends else "?"}


def point_checks(points, gpus):
    """Rows for the table of points, and the problems found (empty when every point is right)."""
    rows, problems = [], []
    for path, s in points:
        config, agg = s["config"], s["aggregate"]
        m, g = config["models_per_gpu"], config["gpus"]
        targets = s.get("targets", [])
        load = f"c = {config['concurrency']}" if config["load"] == "closed" else f"{config['request_rate']} req/s"
        mismatches = agg.get("output_token_mismatches", 0) or 0
        rows.append(f"| {config['arm']} | {m} | {load} | {g} | {len(targets)} | {agg.get('completed', 0):.0f} "
                    f"| {agg.get('failed', 0):.0f} | {mismatches:.0f} |")
        if g != gpus:
            problems.append(f"{path}: config.gpus is {g}, not {gpus}")
        if len(targets) != m * g:
            problems.append(f"{path}: {len(targets)} models driven, not {m} x {g}")
        if agg.get("failed", 0) or mismatches:
            problems.append(f"{path}: {agg.get('failed', 0)} failed, {mismatches} output-length mismatches")
        for t in targets:
            if t["metrics"].get("completed", 0) != config["requests"]:
                problems.append(f"{path}: model {t['model']} completed {t['metrics'].get('completed')} "
                                f"of {config['requests']} requests")
    return rows, problems


def commit_of(source):
    try:
        return subprocess.run(["git", "-C", source, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", required=True)
    ap.add_argument("--study-report", required=True)
    ap.add_argument("--one-gpu", required=True)
    ap.add_argument("--command", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--report")
    ap.add_argument("--gpu-list")
    ap.add_argument("--driver")
    ap.add_argument("--commit")
    ap.add_argument("--raw-link")
    ap.add_argument("--node-check")
    ap.add_argument("--incomplete")
    a = ap.parse_args()

    points = summaries(a.results)
    gpus = max((s["config"]["gpus"] for _, s in points), default=0)
    facts = machine_facts(points, a.gpu_list, a.driver)
    ours = lambda name: read_csv(os.path.join(a.report or os.path.join(a.results, "report"), name))
    one = lambda name: read_csv(os.path.join(a.one_gpu, "report", name))
    study = lambda name: read_csv(os.path.join(a.study_report, name))
    commit = (a.commit or os.environ.get("GPUFRAC_BUILD_COMMIT") or
              commit_of(os.path.dirname(os.path.abspath(__file__))))
    lines = []
    w = lines.append

    spec = next((s for _, s in points), {}).get("config", {})
    w(f"# `gpufrac experiment` on {gpus} GPUs: the reference study's shape\n")
    if a.incomplete:
        w(f"**Incomplete:** {a.incomplete}\n")
    w(f"Measured {facts['start']} to {facts['end']} on {gpus} x {facts['names']}"
      + (f" ({facts['listed']} GPUs in `nvidia-smi -L`)" if facts["listed"] else "")
      + f", driver {facts['driver']}, binaries of commit {commit}. Model: preset `qwen3-4b` (bf16, random "
      f"weights with Qwen3-4B's shapes), ISL {spec.get('isl', '?')} / OSL {spec.get('osl', '?')} token-id "
      "prompts, the study's request counts (max(40, 10c) measured requests per model and point, "
      "min(16, 2c) warmup).\n")
    w("Every arm ran as one node over all the GPUs, every model of a point driven at once through the "
      f"node's router: dedicated {gpus} models (one per GPU, the baseline), timeslice and fractions "
      f"{2 * gpus} models (2 per GPU; fractions: one MPS daemon per GPU, 50% of its SMs and half its "
      "memory per model). tok/s per GPU = the node's output tok/s / "
      f"{gpus}. Beside ours: the reference study (8x A100-SXM4-40GB, vLLM; docs/reference-study.md) and "
      "our one-GPU run of the same arms (docs/results/experiment-h200.md).\n")
    w("Command:\n\n    " + a.command + "\n")
    if a.raw_link:
        w(f"Raw results: every point's `summary.json` and `summary.csv`, `packing.json` and the report "
          f"(`report/`: report.md, CSV tables, SVG plots) under [`{a.raw_link}`]({a.raw_link}).\n")

    tp, vs_tp, one_vs_tp = ours("throughput-m2.csv"), ours("vs-study-throughput.csv"), one("vs-study-throughput.csv")
    w("## Output tok/s per GPU and % of baseline (the study's layout, 2 models per GPU)\n")
    w("Rows matched on requests resident per GPU: a shared arm at c per model against dedicated at 2c.\n")
    w("| req/GPU | dedicated | timeslice | fractions | timeslice % | study HAMi % | 1 GPU timeslice % "
      "| fractions % | study fractions % | 1 GPU fractions % |")
    w("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in (2, 4, 8, 16, 32):
        w(f"| {r} | {fixed(number(tp, r, 'dedicated_m1_tok_s_per_gpu'))} "
          f"| {fixed(number(tp, r, 'timeslice_m2_tok_s_per_gpu'))} | {fixed(number(tp, r, 'fractions_m2_tok_s_per_gpu'))} "
          f"| {pct(number(vs_tp, r, 'timeslice_m2_pct_of_dedicated'))} | {pct(number(vs_tp, r, 'study_timeslice_pct_of_baseline'))} "
          f"| {pct(number(one_vs_tp, r, 'timeslice_m2_pct_of_dedicated'))} "
          f"| {pct(number(vs_tp, r, 'fractions_m2_pct_of_dedicated'))} | {pct(number(vs_tp, r, 'study_fractions_pct_of_baseline'))} "
          f"| {pct(number(one_vs_tp, r, 'fractions_m2_pct_of_dedicated'))} |")

    lat, one_lat = ours("vs-study-latency.csv"), one("vs-study-latency.csv")
    for metric, title, digits in (("ttft", "TTFT p50 (ms)", 1), ("itl", "ITL p50 (ms)", 2)):
        w(f"\n## {title}, same rows, with the study's and the one-GPU run's\n")
        w("| req/GPU | dedicated | study | 1 GPU | timeslice | study HAMi | 1 GPU | fractions | study | 1 GPU |")
        w("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in (2, 4, 8, 16, 32):
            cells = []
            for arm, m in ARMS:
                cells += [fixed(number(lat, r, f"{arm}_m{m}_{metric}_p50_ms"), digits),
                          fixed(number(lat, r, f"study_{arm}_{metric}_p50_ms"), digits),
                          fixed(number(one_lat, r, f"{arm}_m{m}_{metric}_p50_ms"), digits)]
            w(f"| {r} | " + " | ".join(cells) + " |")

    app, eq, one_eq = ours("appendix.csv"), ours("vs-study-equal-concurrency.csv"), one("vs-study-equal-concurrency.csv")
    w("\n## Equal concurrency per model (the study's appendix view)\n")
    w("Node tok/s of each run, and shared / dedicated tok/s per GPU at the same c per model.\n")
    w(f"| c/model | dedicated ({gpus} models) | timeslice ({2 * gpus}) | fractions ({2 * gpus}) | timeslice % "
      "| study HAMi % | 1 GPU timeslice % | fractions % | study fractions % | 1 GPU fractions % |")
    w("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in (1, 2, 4, 8, 16, 32):
        w(f"| {c} | {fixed(number(app, c, 'dedicated_m1_tok_s'), 0)} | {fixed(number(app, c, 'timeslice_m2_tok_s'), 0)} "
          f"| {fixed(number(app, c, 'fractions_m2_tok_s'), 0)} "
          f"| {pct(number(eq, c, 'timeslice_m2_pct_of_dedicated_equal_c'))} "
          f"| {pct(number(eq, c, 'study_timeslice_pct_of_baseline_equal_c'))} "
          f"| {pct(number(one_eq, c, 'timeslice_m2_pct_of_dedicated_equal_c'))} "
          f"| {pct(number(eq, c, 'fractions_m2_pct_of_dedicated_equal_c'))} "
          f"| {pct(number(eq, c, 'study_fractions_pct_of_baseline_equal_c'))} "
          f"| {pct(number(one_eq, c, 'fractions_m2_pct_of_dedicated_equal_c'))} |")

    cost, study_cost, one_cost = ours("cost-16-models.csv"), study("cost-16-models.csv"), one("cost-16-models.csv")
    w("\n## Cost of serving 16 models (rows matched on c per model, 1.00 per 8-GPU node-hour)\n")
    w(f"Dedicated needs two 8-GPU nodes (its tok/s: the {gpus}-model run x 16/{gpus}), fractions one "
      f"(the {2 * gpus}-model run x 16/{2 * gpus}).\n")
    w("| c/model | dedicated $/1M | fractions $/1M | change | study change | 1 GPU change |")
    w("|---:|---:|---:|---:|---:|---:|")
    for c in (1, 2, 4, 8, 16, 32):
        w(f"| {c} | {fixed(number(cost, c, 'dedicated_m1_cost_per_million_tokens'), 4)} "
          f"| {fixed(number(cost, c, 'fractions_m2_cost_per_million_tokens'), 4)} "
          f"| {pct(number(cost, c, 'fractions_m2_change_pct'), True)} "
          f"| {pct(number(study_cost, c, 'fractions_m2_change_pct'), True)} "
          f"| {pct(number(one_cost, c, 'fractions_m2_change_pct'), True)} |")

    packing = os.path.join(a.results, "packing.json")
    w("\n## Light-load packing search (open loop)\n")
    if os.path.exists(packing):
        with open(packing) as f:
            p = json.load(f)
        g = p.get("gpus", gpus)
        w(f"`{p['arm']}` at {p['rate_per_model']} requests/s per model, every probe one node of m models per GPU "
          f"on all {g} GPUs; SLO: TTFT p90 <= {p['slo']['ttft_p90_ms']:g} ms and ITL p50 <= "
          f"{p['slo']['itl_p50_ms']:g} ms for every model, no failed request.\n")
        w("| models/GPU | models | worst TTFT p90 (ms) | worst ITL p50 (ms) | failed | meets SLO |")
        w("|---:|---:|---:|---:|---:|:---|")
        for probe in sorted(p["probes"], key=lambda q: q["models_per_gpu"]):
            m = probe["models_per_gpu"]
            if probe.get("started", True):
                w(f"| {m} | {m * g} | {probe['worst_ttft_p90_ms']:.1f} | {probe['worst_itl_p50_ms']:.2f} "
                  f"| {probe['failed_requests']} | {'yes' if probe['passed'] else 'no'} |")
            else:
                w(f"| {m} | {m * g} | — | — | — | no: did not start |")
        best = p["largest_passing_models_per_gpu"]
        w(f"\n**{best} models per GPU, {best * g} on {g} GPUs** (the one-GPU run: 13 per GPU).")
    else:
        w("Not run (no packing.json).")

    rows, problems = point_checks(points, gpus)
    w("\n## Every point\n")
    w("| arm | models/GPU | load | GPUs | models driven | completed | failed | output-length mismatches |")
    w("|:---|---:|---:|---:|---:|---:|---:|---:|")
    lines.extend(rows)
    if problems:
        w("\nProblems:\n")
        lines.extend(f"- {p}" for p in problems)
    else:
        w(f"\nEvery point: config.gpus {gpus}, every model of the node driven (models per GPU x {gpus}), "
          "every request completed with its full output.")

    if a.node_check and os.path.exists(a.node_check):
        with open(a.node_check) as f:
            w("\n" + f.read().strip())
    with open(a.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
