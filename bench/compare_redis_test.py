#!/usr/bin/env python3
"""Tests of bench/compare-redis (ctest bench/compare-redis/*).

  compare_redis_test.py parse SCRIPT
      The script's parts alone, no server: redis-benchmark's CSV (a captured
      7.0 output) is read with every number; a missing, repeated or extra
      test, a NaN and a bad header are errors; "Error from server", a lost
      connection and a non-zero exit are errors, a WARNING is a note; keys
      are named as redis-benchmark -r names them; the ratios and the two
      targets come out of a known result.
  compare_redis_test.py quick SCRIPT URT_KV
      A real --quick run against urt-kv (both modes) and redis-server (exit
      77 = skipped when redis-server or redis-benchmark is missing): exit 0,
      every table row printed, the JSON holds every server's tests with
      their numbers, and no server is left listening. Then a run interrupted
      by SIGTERM exits 130 and leaves none of its servers running, and a
      missing or broken urt-kv exits 1 with a message.
No check depends on timing or on the figures' values: waits only bound a
hang.
"""

import contextlib
import importlib.machinery
import importlib.util
import io
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
HANG = 120  # seconds: reached only when something hangs
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAILED: {what}", file=sys.stderr)
    return cond


def load_script(path):
    loader = importlib.machinery.SourceFileLoader("compare_redis", path)
    spec = importlib.util.spec_from_loader("compare_redis", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


# redis-benchmark 7.0.15 -t ping,set,get --csv, captured.
CSV = '''"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"PING_INLINE","20304.57","1.832","0.080","0.703","6.247","9.735","14.655"
"PING_MBULK","28129.39","1.220","0.080","0.647","4.055","9.007","23.487"
"SET","40650.41","0.867","0.096","0.599","2.967","5.703","17.087"
"GET","46296.30","0.750","0.104","0.575","1.631","6.223","10.031"
'''


def raises(cr, fn, *args):
    try:
        fn(*args)
    except (cr.Failure, cr.argparse.ArgumentTypeError) as e:
        return str(e)
    return None


def test_parse(script):
    cr = load_script(script)
    tests = ("PING_INLINE", "PING_MBULK", "SET", "GET")
    rows = cr.parse_csv(CSV, tests, "t")
    check(set(rows) == set(tests), f"every test parsed: {sorted(rows)}")
    check(rows["GET"]["rps"] == 46296.30 and rows["GET"]["p50_ms"] == 0.575
          and rows["GET"]["p99_ms"] == 6.223 and rows["GET"]["max_ms"] == 10.031,
          f"GET's numbers: {rows['GET']}")
    check(rows["PING_INLINE"]["p99_ms"] == 9.735, "PING_INLINE p99")

    # CPU lists of the split layout.
    first = min(cr.allowed_cpus())
    check(cr.parse_cpulist("--server-cpus", str(first)) == {first}, "a one-CPU list")
    check(cr.fmt_cpus({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8", "fmt_cpus of runs")
    for bad in ("", "a", "3-1", "1,,2", "99999"):
        check(raises(cr, cr.parse_cpulist, "--server-cpus", bad) is not None,
              f"--server-cpus {bad!r} is an error")
    msg = raises(cr, cr.parse_cpulist, "--client-cpus", "3-1") or ""
    check("--client-cpus" in msg and "'3-1'" in msg, f"the error names the flag and value: {msg}")
    # Command lines the parser refuses: exit 2, the flag and the value named.
    allowed = sorted(cr.allowed_cpus())
    bad_lines = [(["--layout", "sideways"], "--layout"),
                 (["--threads", "0"], "--threads: '0'"),
                 (["--rounds", "0"], "--rounds: '0'"),
                 (["--rounds", "two"], "--rounds: 'two'"),
                 (["--server-cpus", "x"], "--server-cpus: 'x'"),
                 (["--json", "/nonexistent-dir/x.json"], "--json: '/nonexistent-dir/x.json'")]
    if len(allowed) >= 2:
        first = str(allowed[0])
        bad_lines += [(["--server-cpus", first, "--client-cpus", first], "overlap"),
                      (["--layout", "split", "--threads", str(len(allowed) + 1)],
                       f"--threads: '{len(allowed) + 1}'")]
    for argv, words in bad_lines:
        err = io.StringIO()
        code = None
        with contextlib.redirect_stderr(err):
            try:
                cr.parse_args(argv)
            except SystemExit as e:
                code = e.code
        check(code == 2 and words in err.getvalue(),
              f"{argv}: exit 2 naming {words!r}, got {code}: {err.getvalue().strip()[-200:]}")

    lines = CSV.splitlines()
    no_set = "\n".join(ln for ln in lines if not ln.startswith('"SET"'))
    check(raises(cr, cr.parse_csv, no_set, tests, "t") is not None, "a missing test is an error")
    check(raises(cr, cr.parse_csv, CSV + lines[-1] + "\n", tests, "t") is not None,
          "a repeated test is an error")
    check(raises(cr, cr.parse_csv, CSV, ("PING_INLINE", "PING_MBULK", "GET"), "t") is not None,
          "an unexpected test is an error")
    nan = CSV.replace('"0.575"', '"-nan"')
    check(raises(cr, cr.parse_csv, nan, tests, "t") is not None, "a NaN is an error")
    # redis-benchmark -n 1 reports inf requests/s (the run took 0 ms).
    inf = CSV.replace('"46296.30"', '"inf"')
    check(raises(cr, cr.parse_csv, inf, tests, "t") is not None, "inf requests/s is an error")
    zero = CSV.replace('"46296.30"', '"0.00"')
    check(raises(cr, cr.parse_csv, zero, tests, "t") is not None, "0 requests/s is an error")
    check(raises(cr, cr.parse_csv, "\n".join(lines[1:]), tests, "t") is not None,
          "a missing header is an error")
    check(raises(cr, cr.parse_csv, "", tests, "t") is not None, "no output is an error")

    check(cr.check_output(0, CSV, "", "t") == [], "a clean run has no notes")
    notes = cr.check_output(0, CSV, "WARNING: Could not fetch server CONFIG\n", "t")
    check(notes == ["WARNING: Could not fetch server CONFIG"], f"a WARNING is a note: {notes}")
    for err in ("Error from server: ERR unknown command 'FOO'\n",
                "Could not connect to Redis at 127.0.0.1:1: Connection refused\n",
                "Error: Connection reset by peer\n",
                "All clients disconnected... aborting.\n"):
        check(raises(cr, cr.check_output, 0, CSV, err, "t") is not None,
              f"an error is a failure: {err.strip()}")
    check(raises(cr, cr.check_output, 1, CSV, "", "t") is not None,
          "a non-zero exit is a failure")
    # Progress lines end in \r, not \n: an error after one is still seen.
    check(raises(cr, cr.check_output, 0, "KEYS *: rps=1.0\rError from server: ERR x\r", "",
                 "t") is not None, "an error after a \\r is seen")

    check(cr.key_name(42) == b"key:000000000042", f"key names: {cr.key_name(42)!r}")
    check(cr.resp_command("SET", b"k", b"v") == b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n",
          "RESP encoding")

    def row(rps, p99):
        return {"rps": rps, "p50_ms": p99 / 2, "p99_ms": p99, "max_ms": p99 * 2}
    result = {"alone": {}, "loaded": {}}
    for k, rps, p99 in (("urt", 200.0, 1.0), ("asio", 100.0, 20.0), ("redis", 100.0, 10.0)):
        result["alone"][k] = {t: row(rps, 1.0) for t in cr.ALONE_TESTS}
        result["loaded"][k] = {t: row(rps, p99) for t in cr.LOAD_TESTS}
    rat = cr.ratios(result)
    check(rat["alone"]["GET"]["rps_urt_vs_redis"] == 2.0, "urt/redis rps")
    check(rat["loaded"]["GET"]["p99_urt_vs_asio"] == 0.05, "urt/asio p99")
    check(rat["loaded"]["GET"]["p99_urt_vs_redis"] == 0.1, "urt/redis p99")
    tgt = cr.targets(result, rat)
    check(tgt["throughput_alone_at_least_redis"]["met"], "throughput target met")
    check(tgt["control_p99_under_bulk_at_most_tenth"]["met"], "p99 target met at exactly 1/10")
    result["loaded"]["urt"]["PING_MBULK"]["p99_ms"] = 1.5
    rat = cr.ratios(result)
    check(not cr.targets(result, rat)["control_p99_under_bulk_at_most_tenth"]["met"],
          "p99 target not met above 1/10")
    text = cr.table(result, "loaded", cr.LOAD_TESTS, rat)
    check(all(t in text for t in cr.LOAD_TESTS) and all(cr.TITLES[k] in text for k in cr.SERVERS),
          "the table names every test and server")

    # The alone phase's rounds: each figure the median of its rounds, taken
    # per figure (a round's p99 need not come from its median rps).
    rounds = [{"GET": {"rps": 90.0, "p99_ms": 0.9}}, {"GET": {"rps": 70.0, "p99_ms": 0.4}},
              {"GET": {"rps": 100.0, "p99_ms": 2.0}}]
    med = cr.median_rows(rounds)
    check(med == {"GET": {"rps": 90.0, "p99_ms": 0.9}}, f"median of three rounds: {med}")
    med = cr.median_rows(rounds[:2])
    check(med["GET"]["rps"] == 70.0 and med["GET"]["p99_ms"] == 0.4,
          f"an even count takes the lower middle round: {med}")
    check(cr.median_rows(rounds[2:]) == rounds[2], "one round is its own median")


def listening(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def children(pid):
    out = set()
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out |= {int(c) for c in f.read().split()}
    except OSError:
        pass
    return out


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pids, limit=20):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def check_layout(cr, name, doc, rounds):
    """One layout's figures in the JSON: every number there, each phase's
    rounds, every server stopped."""
    for phase in ("alone_rounds", "loaded_rounds"):
        for k in cr.SERVERS:
            got = len(doc.get(phase, {}).get(k, []))
            check(got == rounds, f"{name}: {phase} of {k}: {got} rounds, not {rounds}")
    for phase, tests in (("alone", cr.ALONE_TESTS), ("loaded", cr.LOAD_TESTS)):
        for k in cr.SERVERS:
            rows = doc[phase].get(k, {})
            for t in tests:
                r = rows.get(t)
                if not check(r is not None, f"{name}: {phase} {k} {t} in the JSON"):
                    continue
                for field in ("rps", "p50_ms", "p99_ms", "max_ms"):
                    v = r.get(field)
                    check(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0,
                          f"{name}: {phase} {k} {t} {field} is a number: {v!r}")
                check(r["rps"] > 0, f"{name}: {phase} {k} {t} has requests/s")
    for k in cr.SERVERS:
        b = doc["bulk"].get(k, {})
        check(isinstance(b.get("keys_commands"), int) and b["keys_commands"] >= 0
              and b.get("seconds", 0) > 0, f"{name}: bulk count of {k}: {b}")
        port = doc["servers"][k]["port"]
        check(not listening(port), f"{name}: {k} (port {port}) no longer listening")
    for t in ("throughput_alone_at_least_redis", "control_p99_under_bulk_at_most_tenth"):
        check(isinstance(doc["targets"][t]["met"], bool), f"{name}: target {t} reported")


def test_quick(script, kv):
    for tool in ("redis-server", "redis-benchmark"):
        if not shutil.which(tool):
            print(f"SKIPPED: {tool} not found", file=sys.stderr)
            sys.exit(SKIP)
    cr = load_script(script)
    with tempfile.TemporaryDirectory(prefix="compare-redis-test-") as tmp:
        out_json = os.path.join(tmp, "out.json")
        p = subprocess.run([sys.executable, script, "--quick", "--kv", kv, "--json", out_json],
                           capture_output=True, text=True, timeout=HANG)
        print(p.stdout)
        print(p.stderr, file=sys.stderr)
        if not check(p.returncode == 0, f"--quick exits 0, not {p.returncode}"):
            return
        for t in cr.ALONE_TESTS:
            check(any(ln.startswith(t + " ") for ln in p.stdout.splitlines()),
                  f"a table row for {t}")
        check("KEYS/s during the measurement" in p.stdout, "the bulk KEYS/s line")
        check("targets (reported, not asserted)" in p.stdout, "the targets")
        check("redis-server v=" in p.stdout.lower() or "Redis server v=" in p.stdout,
              "redis-server's version in the header")
        with open(out_json) as f:
            doc = json.load(f)
        check(doc["config"]["keys"] == 10000 and doc["config"]["quick"]
              and doc["config"]["rounds"] == 1, "the quick config")
        layouts = doc.get("layouts", {})
        if cr.cpus() >= 2:
            check(sorted(layouts) == ["shared", "split"], f"both layouts ran: {sorted(layouts)}")
            check("=== split layout" in p.stdout and "=== shared layout" in p.stdout,
                  "a heading per layout")
            split = layouts.get("split", {})
            check(split.get("server_cpus") and split.get("client_cpus")
                  and not (set(cr.parse_cpulist("s", split["server_cpus"]))
                           & set(cr.parse_cpulist("c", split["client_cpus"]))),
                  f"split layout: disjoint server and client CPUs: {split.get('server_cpus')} / "
                  f"{split.get('client_cpus')}")
        for name, result in layouts.items():
            check_layout(cr, name, result, doc["config"]["rounds"])

    # SIGTERM in the middle: exit 130, every server it started is gone.
    proc = subprocess.Popen([sys.executable, script, "--quick", "--kv", kv],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    started = set()
    try:
        for line in proc.stderr:  # progress: the servers run once the keys load
            started |= children(proc.pid)
            if "loading" in line:
                started |= children(proc.pid)
                break
        check(len(started) >= 3, f"three servers seen running: {sorted(started)}")
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=HANG)[1]
        check(proc.returncode == 130, f"SIGTERM: exit 130, not {proc.returncode}: {rest}")
        left = wait_gone(started)
        check(not left, f"SIGTERM: no server left running: {left}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    # A missing urt-kv, and one that exits at once.
    p = subprocess.run([sys.executable, script, "--quick", "--kv", "/nonexistent/urt-kv"],
                       capture_output=True, text=True, timeout=HANG)
    check(p.returncode == 1 and "urt-kv not found" in p.stderr,
          f"a missing urt-kv: exit 1 with a message, not {p.returncode}: {p.stderr.strip()}")
    p = subprocess.run([sys.executable, script, "--quick", "--kv", shutil.which("false")],
                       capture_output=True, text=True, timeout=HANG)
    check(p.returncode == 1 and "exited with status" in p.stderr,
          f"a broken urt-kv: exit 1 with a message, not {p.returncode}: {p.stderr.strip()}")


def main(argv):
    if len(argv) == 2 and argv[0] == "parse":
        test_parse(argv[1])
    elif len(argv) == 3 and argv[0] == "quick":
        test_quick(argv[1], argv[2])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
