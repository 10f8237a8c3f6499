#!/usr/bin/env python3
"""Tests tests/gpu/engine/ab_bench.py against a stand-in for gpufrac_cuda_bench (a script that
writes the bench's JSON shape and logs each call): the builds alternate, every round's value is
printed, the ratio is of the medians, each side gets its own environment, a --pack archive
serves as a build, build B's tests run first, and a failed test or run or a --json among the
bench's arguments is an error. With --serve, against the real `gpufrac` (GPUFRAC_BINARY, which
CTest sets) serving the tiny model on the CPU: both builds' servers measured by gpufrac bench at
two concurrencies, build B's own server arguments (--serve-b) used for B alone, a server that
never becomes healthy named with its log, and per-run arguments refused. No GPU.

Run: GPUFRAC_BINARY=build/gpufrac python3 tests/engine/ab_bench_test.py  (CTest: label unit)
"""
import os
import stat
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import unittest

SOURCE = os.environ.get("GPUFRAC_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
AB_BENCH = os.path.join(SOURCE, "tests", "gpu", "engine", "ab_bench.py")

# Decode batch 1 takes BASE + 0.2 ms per earlier call of the same build (FAKE_CALLS counts them);
# the prefill 10x that, the serving step 5x. FAIL=1 exits 3 without writing anything.
FAKE_BENCH = textwrap.dedent("""\
    #!/usr/bin/env python3
    import json, os, sys
    side, base = os.environ["FAKE_SIDE"], float(os.environ["FAKE_BASE"])
    if os.environ.get("FAIL") == "1":
        print("no usable CUDA device")
        sys.exit(3)
    calls = os.environ["FAKE_CALLS"]
    with open(calls, "a") as f:
        f.write(side + " " + os.environ.get("EXTRA", "-") + "\\n")
    earlier = sum(1 for line in open(calls) if line.split()[0] == side) - 1
    ms = base + 0.2 * earlier
    result = {"decode": [{"batch": 1, "graph_gpu_ms": ms}],
              "prefill": {"tokens": 2048, "gpu_ms": 10 * ms, "after_idle": {"gpu_ms": 9 * ms}},
              "mixed_step": {"decodes": 31, "chunk_tokens": 481, "gpu_ms": 5 * ms}}
    json.dump(result, open(sys.argv[sys.argv.index("--json") + 1], "w"))
""")


def make_build(root, side, base):
    """A build directory whose tests/engine/gpufrac_cuda_bench is the stand-in."""
    build = os.path.join(root, "build-" + side)
    os.makedirs(os.path.join(build, "tests", "engine"))
    path = os.path.join(build, "tests", "engine", "gpufrac_cuda_bench")
    with open(path, "w") as f:
        f.write(FAKE_BENCH)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return build


class AbBenchTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = self.dir.name
        self.calls = os.path.join(self.root, "calls")
        self.a = make_build(self.root, "a", 2.0)
        self.b = make_build(self.root, "b", 1.9)

    def tearDown(self):
        self.dir.cleanup()

    def ab(self, *extra, bench_args=("--batches", "1")):
        env = dict(os.environ, FAKE_CALLS=self.calls)
        command = [sys.executable, AB_BENCH, "--a", self.a, "--b", self.b,
                   "--out", os.path.join(self.root, "out"), *extra, "--", *bench_args]
        return subprocess.run(command, env=env, capture_output=True, text=True)

    def test_builds_alternate_and_the_ratio_is_of_the_medians(self):
        done = self.ab("--rounds", "2", "--env-a", "FAKE_SIDE=a", "--env-a", "FAKE_BASE=2.0",
                       "--env-b", "FAKE_SIDE=b", "--env-b", "FAKE_BASE=1.9",
                       "--env-b", "EXTRA=switched")
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(self.calls) as f:
            self.assertEqual(f.read().split("\n"),
                             ["a -", "b switched", "a -", "b switched", ""])
        lines = {line.split("  ")[0].strip(): line for line in done.stdout.splitlines()}
        # A: 2.0, 2.2 (median 2.1); B: 1.9, 2.1 (median 2.0).
        self.assertIn("2.000 / 2.200  ->  1.900 / 2.100  B/A 0.952", lines["decode batch 1"])
        self.assertIn("20.000 / 22.000  ->  19.000 / 21.000  B/A 0.952", lines["prefill 2048"])
        self.assertIn("B/A 0.952", lines["prefill 2048 after idle"])
        self.assertIn("10.000 / 11.000  ->  9.500 / 10.500", lines["serving step 31+481"])

    def test_a_pack_archive_is_unpacked(self):
        archive = os.path.join(self.root, "b.tar.xz")
        with tarfile.open(archive, "w:xz") as tar:
            tar.add(self.b, arcname="gpu-pack")
        self.b = archive
        done = self.ab("--rounds", "1", "--env-a", "FAKE_SIDE=a", "--env-a", "FAKE_BASE=2.0",
                       "--env-b", "FAKE_SIDE=b", "--env-b", "FAKE_BASE=1.0")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("2.000  ->  1.000  B/A 0.500", done.stdout)

    def test_a_failing_test_of_build_b_stops_before_timing(self):
        for name, status in (("good_test", 0), ("bad_test", 1)):
            path = os.path.join(self.b, "tests", "engine", name)
            with open(path, "w") as f:
                f.write("#!/bin/sh\n" + "echo '[  FAILED  ] Suite.Case' >&2\n" * status +
                        f"exit {status}\n")
            os.chmod(path, 0o755)
        env = ("--env-a", "FAKE_SIDE=a", "--env-a", "FAKE_BASE=2", "--env-b", "FAKE_SIDE=b",
               "--env-b", "FAKE_BASE=2")
        passed = self.ab("--rounds", "1", "--test", "good_test", *env)
        self.assertEqual(passed.returncode, 0, passed.stderr)
        self.assertIn("good_test: passed", passed.stdout)
        os.remove(self.calls)
        failed = self.ab("--test", "good_test", "--test", "bad_test", *env)
        self.assertEqual(failed.returncode, 1)
        self.assertIn("bad_test failed", failed.stderr)
        self.assertIn("Suite.Case", failed.stderr)
        self.assertFalse(os.path.exists(self.calls))  # nothing timed

    def test_a_failed_run_stops_with_its_log(self):
        done = self.ab("--env-a", "FAKE_SIDE=a", "--env-a", "FAKE_BASE=2", "--env-b",
                       "FAKE_SIDE=b", "--env-b", "FAKE_BASE=2", "--env-b", "FAIL=1")
        self.assertEqual(done.returncode, 1)
        self.assertIn("exited 3", done.stderr)
        self.assertIn("no usable CUDA device", done.stderr)

    def test_json_among_the_bench_arguments_is_a_usage_error(self):
        done = self.ab(bench_args=("--json", "x.json"))
        self.assertEqual(done.returncode, 2)
        self.assertIn("--json is set per run", done.stderr)

    def test_serve_b_without_serve_is_a_usage_error(self):
        done = self.ab("--serve-b", "--model tiny")
        self.assertEqual(done.returncode, 2)
        self.assertIn("--serve-b needs --serve", done.stderr)

    def test_a_build_without_the_bench_is_named(self):
        os.remove(os.path.join(self.b, "tests", "engine", "gpufrac_cuda_bench"))
        done = self.ab()
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("no executable", done.stderr)


@unittest.skipUnless(os.environ.get("GPUFRAC_BINARY"), "needs GPUFRAC_BINARY (CTest sets it)")
class AbBenchServeTest(unittest.TestCase):
    """--serve with the real gpufrac: `gpufrac serve --model tiny --device cpu` and its bench."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = self.dir.name
        self.builds = []
        for side in ("a", "b"):
            build = os.path.join(self.root, "build-" + side)
            os.makedirs(build)
            os.symlink(os.path.abspath(os.environ["GPUFRAC_BINARY"]), os.path.join(build, "gpufrac"))
            self.builds.append(build)

    def tearDown(self):
        self.dir.cleanup()

    def ab(self, serve, *bench_args, serve_b=None):
        command = [sys.executable, AB_BENCH, "--a", self.builds[0], "--b", self.builds[1],
                   "--rounds", "1", "--out", os.path.join(self.root, "out"), "--serve", serve,
                   *(["--serve-b", serve_b] if serve_b is not None else []), "--", *bench_args]
        return subprocess.run(command, capture_output=True, text=True, timeout=300)

    def test_both_servers_are_measured_per_run_point(self):
        done = self.ab("--model tiny --device cpu --max-model-len 256", "--isl", "16", "--osl",
                       "4", "--concurrency", "1,2", "--requests", "4", "--warmup", "1")
        self.assertEqual(done.returncode, 0, done.stderr + done.stdout)
        rows = {line.split("  ")[0]: line for line in done.stdout.splitlines() if "B/A" in line}
        self.assertEqual(list(rows), [f"c{c} {point}" for c in (1, 2) for point in
                                      ("output tok/s", "TTFT p50 ms", "ITL p50 ms")])
        for name, line in rows.items():
            a, b = line[len(name):].split("B/A")[0].split("->")
            self.assertGreater(float(a), 0, line)
            self.assertGreater(float(b), 0, line)
        for side in ("a", "b"):
            summary = os.path.join(self.root, "out", f"{side}-1-bench", "dedicated-m1", "c2",
                                   "summary.json")
            self.assertTrue(os.path.isfile(summary), summary)
            with open(os.path.join(self.root, "out", f"{side}-1-serve.log")) as log:
                self.assertIn("listening on http://", log.read())

    def test_serve_b_gives_build_b_its_own_server_arguments(self):
        done = self.ab("--model tiny --device cpu --max-model-len 256", "--isl", "16", "--osl",
                       "4", "--concurrency", "1", "--requests", "2", "--warmup", "1",
                       serve_b="--model no-such-model --device cpu")
        self.assertEqual(done.returncode, 1, done.stderr + done.stdout)
        self.assertIn("did not become healthy", done.stderr)
        self.assertIn("b-1-serve.log", done.stderr)
        with open(os.path.join(self.root, "out", "a-1-serve.log")) as log:
            self.assertIn("listening on http://", log.read())
        self.assertTrue(os.path.isfile(os.path.join(self.root, "out", "a-1-bench", "dedicated-m1",
                                                    "c1", "summary.json")))

    def test_a_server_that_never_becomes_healthy_is_named_with_its_log(self):
        done = self.ab("--model no-such-model --device cpu", "--concurrency", "1")
        self.assertEqual(done.returncode, 1)
        self.assertIn("did not become healthy", done.stderr)
        self.assertIn("no-such-model", done.stderr)

    def test_per_run_arguments_are_usage_errors(self):
        for serve, bench in (("--model tiny", ("--target", "http://x")),
                             ("--model tiny", ("--out", "d")),
                             ("--model tiny --port 8000", ())):
            done = self.ab(serve, *bench)
            self.assertEqual(done.returncode, 2, done.stderr)
            self.assertIn("is set per run by ab_bench", done.stderr)
        done = self.ab("--model tiny", serve_b="--model tiny --port 8000")
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("is set per run by ab_bench", done.stderr)


if __name__ == "__main__":
    unittest.main()
