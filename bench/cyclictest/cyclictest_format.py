#!/usr/bin/env python3
"""One strict parser of the kernel cyclictest's output (rt-tests 2.40).

It accepts only what cyclictest prints, line for line and key for key:
stdout with -q (the summary), without -q (the live frames, of which the
last is the result), with -h (the histogram dump after them), --histfile
(the same dump in a file) and --json. Any other line or key is an error,
so urt-cyclictest, checked with it, is a drop-in for parsers written
against cyclictest. The one exception is urt's top-level "urt" object in
the JSON, allowed only with --allow-urt-json.

  cyclictest_format.py stdout FILE -t N [-q] [--hist-buckets B] [--histfile]
  cyclictest_format.py histfile FILE -t N --hist-buckets B
  cyclictest_format.py json FILE -t N [--hist-buckets B] [--allow-urt-json]
  cyclictest_format.py fixtures DIR          every fixture, and the negative cases
  cyclictest_format.py live TOOL [--urt]      runs TOOL in every mode for 1, 2, 4 threads

Exit status 0: accepted; 1: rejected (the first offending line on stderr);
77: the live check cannot run here (skipped, with the reason).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

SKIP = 77


class Reject(Exception):
    pass


def _int_field(text, width, what, line_no):
    """A printf "%<width>d" field: right-aligned, at least `width` wide."""
    v = text.strip()
    if not re.fullmatch(r"-?\d+", v) or text != v.rjust(width):
        raise Reject(f"line {line_no}: {what} {text!r} is not printed as %{width}d")
    return int(v)


# T:%2d (%5d) P:%2d I:%ld C:%7lu Min:%7ld Act:%5ld Avg:%5ld Max:%8ld
STATUS = re.compile(r"T:( *\d+) \(( *\d+)\) P:( *\d+) I:(\d+) C:( *\d+) Min:( *-?\d+) "
                    r"Act:( *-?\d+) Avg:( *-?\d+) Max:( *-?\d+)")
POLICY = re.compile(r"(?:\x1b\[(\d+)A)?policy: (?:other|fifo|rr|batch|idle)(?:/other)?: loadavg: "
                    r"\d+\.\d\d \d+\.\d\d \d+\.\d\d \d+/\d+ \d+          ")
LATENCY = re.compile(r"# /dev/cpu_dma_latency set to \d+us")


def check_status(line, line_no, index, final):
    """One T: line; `final`: a -q summary line, read after the run (a live
    frame reads its figures while the threads record, so only their format
    is checked there)."""
    m = STATUS.fullmatch(line)
    if not m:
        raise Reject(f"line {line_no}: not a cyclictest status line: {line!r}")
    t = _int_field(m[1], 2, "T:", line_no)
    tid = _int_field(m[2], 5, "tid", line_no)
    _int_field(m[3], 2, "P:", line_no)
    cycles = _int_field(m[5], 7, "C:", line_no)
    mn = _int_field(m[6], 7, "Min:", line_no)
    act = _int_field(m[7], 5, "Act:", line_no)
    avg = _int_field(m[8], 5, "Avg:", line_no)
    mx = _int_field(m[9], 8, "Max:", line_no)
    if t != index:
        raise Reject(f"line {line_no}: thread {t} where thread {index} comes")
    if cycles == 0 and (mn, act, avg, mx) != (1000000, 0, 0, 0):
        raise Reject(f"line {line_no}: no cycle yet, but not cyclictest's placeholders "
                     f"(Min:1000000 Act:0 Avg:0 Max:0): {line!r}")
    if final and cycles > 0 and (tid == 0 or not mn <= avg <= mx or not mn <= act <= mx):
        raise Reject(f"line {line_no}: inconsistent status line: {line!r}")
    return cycles


def check_histogram(lines, start, threads, buckets):
    """The -h dump from lines[start]; returns the index after its empty line."""
    i = start

    def take(what):
        nonlocal i
        if i >= len(lines):
            raise Reject(f"line {i + 1}: end of output where {what} comes")
        i += 1
        return lines[i - 1]

    if take("# Histogram") != "# Histogram":
        raise Reject(f"line {i}: {lines[i - 1]!r} where '# Histogram' comes")
    totals = [0] * threads
    for b in range(buckets):
        line = take(f"bucket {b}")
        m = re.fullmatch(r"(\d{6,}) (\d{6,}(?:\t\d{6,})*)", line)
        if not m or int(m[1]) != b or m[1] != f"{b:06d}":
            raise Reject(f"line {i}: {line!r} is not histogram bucket {b:06d}")
        cols = m[2].split("\t")
        if len(cols) != threads:
            raise Reject(f"line {i}: {len(cols)} columns for {threads} threads")
        for j, c in enumerate(cols):
            totals[j] += int(c)

    def footer(label, width):
        line = take(label)
        prefix = f"# {label}:"
        if not line.startswith(prefix):
            raise Reject(f"line {i}: {line!r} where '{prefix}' comes")
        vals = line[len(prefix):].split(" ")[1:]
        if line[len(prefix):] != "".join(" " + v for v in vals) or len(vals) != threads or \
                any(not re.fullmatch(rf"\d{{{width},}}", v) for v in vals):
            raise Reject(f"line {i}: {line!r}: not {threads} %0{width} values")
        return [int(v) for v in vals]

    if footer("Total", 9) != totals:
        raise Reject(f"line {i}: '# Total:' is not the sum of the buckets {totals}")
    mins = footer("Min Latencies", 5)
    avgs = footer("Avg Latencies", 5)
    maxs = footer("Max Latencies", 5)
    overflows = footer("Histogram Overflows", 5)
    for j in range(threads):
        if totals[j] + overflows[j] > 0 and not mins[j] <= avgs[j] <= maxs[j]:
            raise Reject(f"thread {j}: Min/Avg/Max {mins[j]}/{avgs[j]}/{maxs[j]} out of order")
    if take("# Histogram Overflow at cycle number:") != "# Histogram Overflow at cycle number:":
        raise Reject(f"line {i}: {lines[i - 1]!r} where '# Histogram Overflow at cycle number:' "
                     "comes")
    for j in range(threads):
        line = take(f"# Thread {j}:")
        m = re.fullmatch(rf"# Thread {j}:((?: \d{{5,}})*)(?: # (\d{{5,}}) others)?", line)
        if not m:
            raise Reject(f"line {i}: {line!r} is not '# Thread {j}:' and its overflow cycles")
        listed = len(m[1].split()) + (int(m[2]) if m[2] else 0)
        if listed != overflows[j]:
            raise Reject(f"line {i}: {listed} overflow cycles for {overflows[j]} overflows")
    if take("the empty line") != "":
        raise Reject(f"line {i}: {lines[i - 1]!r} where the histogram's empty line comes")
    return i


def split_lines(text):
    if text and not text.endswith("\n"):
        raise Reject("the output does not end with a newline")
    return text.split("\n")[:-1] if text else []


def check_stdout(text, threads, quiet, buckets=0, histfile=False):
    """cyclictest's stdout for -t threads with -q or not, -h buckets, --histfile."""
    lines = split_lines(text)
    i = 0
    if i < len(lines) and LATENCY.fullmatch(lines[i]):
        i += 1
    if not quiet:
        frames = 0
        while i < len(lines) and POLICY.fullmatch(lines[i]):
            m = POLICY.fullmatch(lines[i])
            up = m[1]
            if frames == 0 and up is not None:
                raise Reject(f"line {i + 1}: the first frame moves the cursor up")
            if frames > 0 and (up is None or int(up) != threads + 2):
                raise Reject(f"line {i + 1}: frame {frames + 1} does not start with "
                             f"ESC[{threads + 2}A")
            if i + 1 >= len(lines) or lines[i + 1] != "":
                raise Reject(f"line {i + 2}: the policy line is not followed by an empty line")
            i += 2
            for t in range(threads):
                if i >= len(lines):
                    raise Reject(f"line {i + 1}: end of output in frame {frames + 1}")
                check_status(lines[i], i + 1, t, final=False)
                i += 1
            frames += 1
        if frames == 0:
            raise Reject(f"line {i + 1}: no live frame ('policy: ...: loadavg: ...')")
    elif buckets == 0:
        for t in range(threads):
            if i >= len(lines):
                raise Reject(f"line {i + 1}: end of output where thread {t}'s summary comes")
            check_status(lines[i], i + 1, t, final=True)
            i += 1
    if buckets and not histfile:
        i = check_histogram(lines, i, threads, buckets)
    if i != len(lines):
        raise Reject(f"line {i + 1}: a line cyclictest does not print: {lines[i]!r}")


def check_histfile(text, threads, buckets):
    lines = split_lines(text)
    i = check_histogram(lines, 0, threads, buckets)
    if i != len(lines):
        raise Reject(f"line {i + 1}: a line cyclictest does not write: {lines[i]!r}")


def _keys(obj, expected, where):
    keys = [k for k, _ in obj]
    if keys != expected:
        raise Reject(f"{where}: keys {keys}, cyclictest writes {expected}")
    return dict(obj)


def check_json(text, threads, buckets=0, allow_urt=False):
    # cyclictest writes "avg": -nan for a thread without cycles.
    text = re.sub(r'("avg": )-?nan\b', r"\g<1>0", text)
    try:
        doc = json.loads(text, object_pairs_hook=lambda pairs: pairs)
    except ValueError as e:
        raise Reject(f"not JSON: {e}")
    top = ["file_version", "cmdline:", "rt_test_version:", "start_time", "end_time",
           "return_code", "sysinfo", "num_threads", "resolution_in_ns", "thread"]
    if allow_urt and [k for k, _ in doc][-1:] == ["urt"]:
        top = top + ["urt"]
    d = _keys(doc, top, "top level")
    if d["file_version"] != 1:
        raise Reject(f"file_version {d['file_version']}")
    for k in ("cmdline:", "rt_test_version:", "start_time", "end_time"):
        if not isinstance(d[k], str):
            raise Reject(f"{k} is not a string")
    if not re.fullmatch(r"[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d [+-]\d{4}",
                        d["start_time"]):
        raise Reject(f"start_time {d['start_time']!r} is not cyclictest's RFC 2822 time")
    sysinfo = _keys(d["sysinfo"], ["sysname", "nodename", "release", "version", "machine",
                                   "realtime"], "sysinfo")
    if sysinfo["realtime"] not in (0, 1):
        raise Reject("sysinfo.realtime is not 0 or 1")
    if d["num_threads"] != threads:
        raise Reject(f"num_threads {d['num_threads']}, expected {threads}")
    if not isinstance(d["resolution_in_ns"], int):
        raise Reject("resolution_in_ns is not a whole number")
    per = _keys(d["thread"], [str(t) for t in range(threads)], "thread")
    for t in range(threads):
        th = _keys(per[str(t)], ["histogram", "cycles", "min", "max", "avg", "cpu", "node"],
                   f"thread.{t}")
        hist = th["histogram"]
        if not isinstance(hist, list):
            raise Reject(f"thread.{t}.histogram is not an object")
        if hist and not buckets:
            raise Reject(f"thread.{t}.histogram is filled without -h (cyclictest: empty)")
        last = -1
        for b, c in hist:
            if not re.fullmatch(r"\d+", b) or not last < int(b) < buckets or \
                    not isinstance(c, int) or c <= 0:
                raise Reject(f"thread.{t}.histogram: \"{b}\": {c} is not a non-empty bucket "
                             f"below {buckets} in order")
            last = int(b)
        if sum(c for _, c in hist) > th["cycles"]:
            raise Reject(f"thread.{t}: more samples in the histogram than cycles")
        for k in ("cycles", "min", "max", "cpu", "node"):
            if not isinstance(th[k], int):
                raise Reject(f"thread.{t}.{k} is not a whole number")
        if not isinstance(th["avg"], (int, float)):
            raise Reject(f"thread.{t}.avg is not a number")
    # The text too: cyclictest's "{      }" for an empty histogram.
    for m in re.finditer(r'"histogram": \{(\s*)\}', text):
        if m[1] != "      ":
            raise Reject(f"an empty histogram written {m[0]!r}, cyclictest writes "
                         "'\"histogram\": {      }'")


# --------------------------------------------------------------- fixtures

def fixture_cases(directory):
    """(file, kind, threads, quiet, buckets) for each fixture, by its name."""
    cases = []
    for name in sorted(os.listdir(directory)):
        m = re.fullmatch(r"(q|live|live-h|hist|histfile|json|json-h)(?:-p80)?-t(\d+)\.(txt|hist|json)",
                         name)
        if not m:
            continue
        kind, threads, ext = m[1], int(m[2]), m[3]
        buckets = 100 if kind in ("hist", "histfile", "json-h") else (50 if kind == "live-h"
                                                                       else 0)
        cases.append((os.path.join(directory, name), kind, threads, ext, buckets))
    return cases


def check_file(path, kind, threads, ext, buckets, allow_urt=False):
    with open(path, newline="") as f:
        text = f.read()
    if ext == "json":
        check_json(text, threads, buckets, allow_urt)
    elif ext == "hist":
        check_histfile(text, threads, buckets)
    else:
        quiet = kind not in ("live", "live-h")
        check_stdout(text, threads, quiet, buckets, histfile=kind in ("histfile", "json"))


def must_reject(what, fn):
    try:
        fn()
    except Reject as e:
        print(f"  rejected, as it must: {what}: {e}")
        return True
    print(f"FAIL: accepted {what}", file=sys.stderr)
    return False


def run_fixtures(directory):
    cases = fixture_cases(directory)
    kinds = {(k, t) for _, k, t, _, _ in cases}
    missing = [(k, t) for k in ("q", "live", "hist", "histfile", "json", "json-h")
               for t in (1, 2, 4) if (k, t) not in kinds]
    if missing:
        print(f"FAIL: fixtures missing: {missing}", file=sys.stderr)
        return 1
    ok = True
    for path, kind, threads, ext, buckets in cases:
        try:
            check_file(path, kind, threads, ext, buckets)
            print(f"  accepted: {os.path.basename(path)}")
        except Reject as e:
            print(f"FAIL: {os.path.basename(path)}: {e}", file=sys.stderr)
            ok = False

    # Negative cases: urt's old additions, and any extra line or key.
    def text(name):
        with open(os.path.join(directory, name), newline="") as f:
            return f.read()
    q2 = text("q-t2.txt")
    ok &= must_reject("-q with urt's percentile lines",
                      lambda: check_stdout(q2 + "T: 0 p50: 0 p99: 16 p99.9: 60\n", 2, True))
    ok &= must_reject("-q with a '# timer:' line",
                      lambda: check_stdout(q2 + "# timer: adaptive, advance 18.0 us, spun 1.13 "
                                           "us per release\n", 2, True))
    ok &= must_reject("-q with an empty line", lambda: check_stdout(q2 + "\n", 2, True))
    ok &= must_reject("-q with a thread missing",
                      lambda: check_stdout(q2, 4, True))
    h1 = text("hist-t1.txt")
    first, rest = h1.split("\n", 1)
    ok &= must_reject("-q -h with a status line before the histogram",
                      lambda: check_stdout(first + "\nT: 0 ( 3227) P: 0 I:1000 C:    100 Min:  "
                                           "   69 Act:  109 Avg:  251 Max:   15001\n" + rest,
                                           1, True, 100))
    ok &= must_reject("-h with one bucket fewer",
                      lambda: check_stdout(h1, 1, True, 101))
    live = text("live-t2.txt")
    ok &= must_reject("non -q with a line after the last frame",
                      lambda: check_stdout(live + "# bandwidth: off\n", 2, False))
    ok &= must_reject("non -q with a first frame without placeholders",
                      lambda: check_stdout(live.replace("C:      0 Min:1000000", "C:      0 "
                                                        "Min:      7", 1), 2, False))
    hf = text("histfile-t2.hist")
    ok &= must_reject("--histfile with an extra line",
                      lambda: check_histfile(hf + "# p50: 3\n", 2, 100))
    j1 = text("json-t1.json")
    ok &= must_reject("JSON with p50 in a thread",
                      lambda: check_json(j1.replace('"node": 0', '"node": 0,\n      "p50": 3', 1),
                                         1))
    ok &= must_reject("JSON with a top-level 'urt' object without --allow-urt-json",
                      lambda: check_json(j1.rstrip().rstrip("}") + ',\n  "urt": {}\n}\n', 1))
    ok &= must_reject("JSON with a filled histogram without -h",
                      lambda: check_json(j1.replace('"histogram": {      }',
                                                    '"histogram": {\n        "5": 1\n      }', 1),
                                         1))
    ok &= must_reject("JSON with '{}' for an empty histogram",
                      lambda: check_json(j1.replace('"histogram": {      }', '"histogram": {}'),
                                         1))
    return 0 if ok else 1


# --------------------------------------------------------------- live runs

def live_modes(threads, work):
    """(name, extra flags, kind, ext-of-checked-file, buckets, file) per mode."""
    common = [f"-t{threads}", "-i1000", "-l100"]
    hf = os.path.join(work, f"histfile-t{threads}.hist")
    js = os.path.join(work, f"json-t{threads}.json")
    jh = os.path.join(work, f"json-h-t{threads}.json")
    return [
        ("q", common + ["-q"], None),
        ("live", common, None),
        ("live-h", common + ["-h", "50"], None),
        ("hist", common + ["-q", "-h", "100"], None),
        ("histfile", common + ["-q", "-h", "100", f"--histfile={hf}"], hf),
        ("json", common + ["-q", f"--json={js}"], js),
        ("json-h", common + ["-q", "-h", "100", f"--json={jh}"], jh),
    ]


def run_live(tool, urt):
    if not urt:
        if os.geteuid() != 0:
            print("SKIP: the kernel cyclictest needs root to run (it refuses without "
                  "SCHED_FIFO); its captured fixtures are checked instead")
            return SKIP
        if subprocess.call(["sh", "-c", f"command -v {tool}"], stdout=subprocess.DEVNULL) != 0:
            print(f"SKIP: {tool} is not installed (rt-tests); its captured fixtures are "
                  "checked instead")
            return SKIP
    ok = True
    with tempfile.TemporaryDirectory(prefix="cyclictest-format-") as work:
        for threads in (1, 2, 4):
            for kind, flags, extra_file in live_modes(threads, work):
                cmd = [tool] + flags + (["--policy=other"] if urt else [])
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   timeout=60)
                if p.returncode != 0:
                    print(f"FAIL: {' '.join(cmd)}: exit {p.returncode}: "
                          f"{p.stderr.decode(errors='replace')[-400:]}", file=sys.stderr)
                    ok = False
                    continue
                buckets = 100 if kind in ("hist", "histfile", "json-h") else (
                    50 if kind == "live-h" else 0)
                try:
                    check_stdout(p.stdout.decode(), threads, kind not in ("live", "live-h"),
                                 buckets, histfile=kind in ("histfile", "json"))
                    if extra_file is not None:
                        with open(extra_file, newline="") as f:
                            body = f.read()
                        if kind == "histfile":
                            check_histfile(body, threads, buckets)
                        else:
                            check_json(body, threads, buckets, allow_urt=urt)
                            if urt and '"urt": {' not in body:
                                raise Reject("urt-cyclictest's JSON has no 'urt' object")
                    print(f"  accepted: {' '.join(cmd)}")
                except Reject as e:
                    print(f"FAIL: {' '.join(cmd)}: {e}", file=sys.stderr)
                    ok = False
        if urt:
            # urt's additions are not cyclictest's: under --urt-summary only.
            cmd = [tool, "-t2", "-i1000", "-l20", "-q", "--policy=other", "--urt-summary"]
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
            ok &= p.returncode == 0 and must_reject(
                "urt-cyclictest --urt-summary's stdout",
                lambda: check_stdout(p.stdout.decode(), 2, True))
    return 0 if ok else 1


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=["stdout", "histfile", "json", "fixtures", "live"])
    p.add_argument("path", help="the file to check, the fixtures folder, or the tool to run")
    p.add_argument("-t", type=int, default=1, help="threads")
    p.add_argument("-q", action="store_true", help="the output of a -q run")
    p.add_argument("--hist-buckets", type=int, default=0, help="the -h of the run")
    p.add_argument("--histfile", action="store_true", help="the run had --histfile")
    p.add_argument("--allow-urt-json", action="store_true", help="accept a top-level 'urt'")
    p.add_argument("--urt", action="store_true", help="live: the tool is urt-cyclictest")
    a = p.parse_args(argv)
    if a.mode == "fixtures":
        return run_fixtures(a.path)
    if a.mode == "live":
        return run_live(a.path, a.urt)
    try:
        with open(a.path, newline="") as f:
            text = f.read()
        if a.mode == "stdout":
            check_stdout(text, a.t, a.q, a.hist_buckets, a.histfile)
        elif a.mode == "histfile":
            check_histfile(text, a.t, a.hist_buckets)
        else:
            check_json(text, a.t, a.hist_buckets, a.allow_urt_json)
    except Reject as e:
        print(f"{a.path}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
