#!/usr/bin/env python3
"""One strict parser of the kernel cyclictest's output (rt-tests 2.40).

It accepts only what cyclictest prints, line for line and key for key:
stdout with -q (the summary), without -q (the live frames, of which the
last is the result), with -h (the histogram dump after them), --histfile
(the same dump in a file) and --json; each also with -N (ns: wider Act:
and Avg:, "resolution_in_ns": 1), -H (the histogram's summary column),
-v (the preamble and the "n:c:v" samples instead of the frames), -b (the
"# Thread Ids:" and break lines), -M (the cursor moved back down at the
end) and --spike (the spike list). Any other line or key is an error,
so urt-cyclictest, checked with it, is a drop-in for parsers written
against cyclictest. The one exception is urt's top-level "urt" object in
the JSON, allowed only with --allow-urt-json.

  cyclictest_format.py stdout FILE -t N [-q] [--hist-buckets B] [--histfile]
                       [-N] [-H] [-v] [-b] [-M] [--spike]
  cyclictest_format.py histfile FILE -t N --hist-buckets B [-H]
  cyclictest_format.py json FILE -t N [--hist-buckets B] [-N] [--allow-urt-json]
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


def check_status(line, line_no, index, final, nsecs=False):
    """One T: line; `final`: a -q summary line, read after the run (a live
    frame reads its figures while the threads record, so only their format
    is checked there). -N (`nsecs`) prints Act: and Avg: as %8ld."""
    m = STATUS.fullmatch(line)
    if not m:
        raise Reject(f"line {line_no}: not a cyclictest status line: {line!r}")
    t = _int_field(m[1], 2, "T:", line_no)
    tid = _int_field(m[2], 5, "tid", line_no)
    _int_field(m[3], 2, "P:", line_no)
    cycles = _int_field(m[5], 7, "C:", line_no)
    mn = _int_field(m[6], 7, "Min:", line_no)
    act = _int_field(m[7], 8 if nsecs else 5, "Act:", line_no)
    avg = _int_field(m[8], 8 if nsecs else 5, "Avg:", line_no)
    mx = _int_field(m[9], 8, "Max:", line_no)
    if t != index:
        raise Reject(f"line {line_no}: thread {t} where thread {index} comes")
    if cycles == 0 and (mn, act, avg, mx) != (1000000, 0, 0, 0):
        raise Reject(f"line {line_no}: no cycle yet, but not cyclictest's placeholders "
                     f"(Min:1000000 Act:0 Avg:0 Max:0): {line!r}")
    if final and cycles > 0 and (tid == 0 or not mn <= avg <= mx or not mn <= act <= mx):
        raise Reject(f"line {line_no}: inconsistent status line: {line!r}")
    return cycles, tid


def check_histogram(lines, start, threads, buckets, histofall=False):
    """The -h dump from lines[start]; returns the index after its empty line.
    -H (`histofall`) with more than one thread: a last column with the sum
    of the threads', and a last value on # Total: (the sum), # Max
    Latencies: (the largest) and # Histogram Overflows: (the sum)."""
    i = start
    summary = histofall and threads > 1
    columns = threads + (1 if summary else 0)

    def take(what):
        nonlocal i
        if i >= len(lines):
            raise Reject(f"line {i + 1}: end of output where {what} comes")
        i += 1
        return lines[i - 1]

    if take("# Histogram") != "# Histogram":
        raise Reject(f"line {i}: {lines[i - 1]!r} where '# Histogram' comes")
    totals = [0] * columns
    for b in range(buckets):
        line = take(f"bucket {b}")
        m = re.fullmatch(r"(\d{6,}) (\d{6,}(?:\t\d{6,})*)", line)
        if not m or int(m[1]) != b or m[1] != f"{b:06d}":
            raise Reject(f"line {i}: {line!r} is not histogram bucket {b:06d}")
        cols = [int(c) for c in m[2].split("\t")]
        if len(cols) != columns:
            raise Reject(f"line {i}: {len(cols)} columns for {threads} threads"
                         + (" and the -H summary" if summary else ""))
        if summary and cols[-1] != sum(cols[:-1]):
            raise Reject(f"line {i}: the -H summary column {cols[-1]} is not the sum of the "
                         f"threads' {sum(cols[:-1])}")
        for j, c in enumerate(cols):
            totals[j] += c

    def footer(label, width, count=threads):
        line = take(label)
        prefix = f"# {label}:"
        if not line.startswith(prefix):
            raise Reject(f"line {i}: {line!r} where '{prefix}' comes")
        vals = line[len(prefix):].split(" ")[1:]
        if line[len(prefix):] != "".join(" " + v for v in vals) or len(vals) != count or \
                any(not re.fullmatch(rf"\d{{{width},}}", v) for v in vals):
            raise Reject(f"line {i}: {line!r}: not {count} %0{width} values")
        return [int(v) for v in vals]

    if footer("Total", 9, columns) != totals:
        raise Reject(f"line {i}: '# Total:' is not the sum of the buckets {totals}")
    mins = footer("Min Latencies", 5)
    avgs = footer("Avg Latencies", 5)
    maxs = footer("Max Latencies", 5, columns)
    overflows = footer("Histogram Overflows", 5, columns)
    if summary:
        if maxs[-1] != max(maxs[:-1]):
            raise Reject(f"line {i - 1}: the -H max {maxs[-1]} is not the threads' largest")
        if overflows[-1] != sum(overflows[:-1]):
            raise Reject(f"line {i}: the -H overflows {overflows[-1]} are not the threads' sum")
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


VERBOSE = re.compile(r"( *\d+):( *\d+):( *-?\d+)")
SPIKE = re.compile(r"T:( *\d+) Spike:( *-?\d+): TS: ( *-?\d+)")


def check_stdout(text, threads, quiet, buckets=0, histfile=False, nsecs=False, histofall=False,
                 verbose=False, breaktrace=False, refresh_on_max=False, spike=False):
    """cyclictest's stdout for -t threads with -q or not, -h buckets, --histfile,
    -N (nsecs), -H (histofall), -v (verbose), -b (breaktrace), -M
    (refresh_on_max) and --spike."""
    frames_shown = not quiet and not verbose
    if refresh_on_max and frames_shown:
        # cyclictest -M ends its frames with the cursor moved back down,
        # "ESC[<threads+2>B", right after the last frame or after the
        # "ESC[<threads+2>A" that waited for the next one, without a newline.
        down = f"\x1b[{threads + 2}B"
        at = text.find(down)
        if at < 0 or text.count(down) != 1:
            raise Reject(f"-M: not one {down!r} after the frames")
        before = text[:at]
        up = f"\x1b[{threads + 2}A"
        if before.endswith(up):
            before = before[:-len(up)]
        if not before.endswith("\n"):
            raise Reject(f"-M: {down!r} does not follow a frame")
        text = before + text[at + len(down):]
    lines = split_lines(text)
    i = 0

    def at(regex):
        return i < len(lines) and regex.fullmatch(lines[i])

    if verbose:
        # The preamble: "Using N cpus." (when -v came before -a CPUSET),
        # "Max CPUs = N", "Online CPUs = N", "Using N cpus." (-a CPUSET).
        using = re.compile(r"Using \d+ cpus\.")
        if at(using):
            i += 1
        for what in ("Max CPUs", "Online CPUs"):
            if not at(re.compile(re.escape(what) + r" = \d+")):
                raise Reject(f"line {i + 1}: -v: '{what} = N' expected: "
                             f"{lines[i] if i < len(lines) else 'end of output'!r}")
            i += 1
        if at(using):
            i += 1
    if at(LATENCY):
        i += 1
    if verbose:
        for t in range(threads):
            if at(re.compile(rf"Thread {t} using cpu \d+\.")):
                i += 1
            if not at(re.compile(rf"Thread {t} Interval: \d+")):
                raise Reject(f"line {i + 1}: -v: 'Thread {t} Interval: N' expected")
            i += 1
        # The samples, "%8d:%8lu:%8ld" (thread, cycle, value), threads
        # interleaved; a thread's cycles never go back (with -o, the cycle
        # of each group's max).
        last = {}
        while at(VERBOSE):
            m = VERBOSE.fullmatch(lines[i])
            t = _int_field(m[1], 8, "-v thread", i + 1)
            c = _int_field(m[2], 8, "-v cycle", i + 1)
            _int_field(m[3], 8, "-v value", i + 1)
            if not 0 <= t < threads:
                raise Reject(f"line {i + 1}: -v sample of thread {t} (of {threads})")
            if c < last.get(t, 0):
                raise Reject(f"line {i + 1}: -v: thread {t}'s cycle {c} after {last[t]}")
            last[t] = c
            i += 1
    if frames_shown:
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
                check_status(lines[i], i + 1, t, final=False, nsecs=nsecs)
                i += 1
            frames += 1
        if frames == 0:
            raise Reject(f"line {i + 1}: no live frame ('policy: ...: loadavg: ...')")
    elif quiet and buckets == 0:
        for t in range(threads):
            if i >= len(lines):
                raise Reject(f"line {i + 1}: end of output where thread {t}'s summary comes")
            check_status(lines[i], i + 1, t, final=True, nsecs=nsecs)
            i += 1
    if spike and i < len(lines) and lines[i] == "":
        # An empty line, "T:%2d Spike:%8ld: TS: %12ld" per kept spike,
        # "spikes = N" (all of them) and an empty line; nothing without one.
        i += 1
        kept = 0
        while at(SPIKE):
            m = SPIKE.fullmatch(lines[i])
            t = _int_field(m[1], 2, "spike T:", i + 1)
            _int_field(m[2], 8, "Spike:", i + 1)
            _int_field(m[3], 12, "TS:", i + 1)
            if not 0 <= t < threads:
                raise Reject(f"line {i + 1}: a spike of thread {t} (of {threads})")
            kept += 1
            i += 1
        m = re.fullmatch(r"spikes = (\d+)", lines[i]) if i < len(lines) else None
        if not kept or not m or int(m[1]) < kept:
            raise Reject(f"line {i + 1}: not the end of a spike list of {kept}: "
                         f"{lines[i] if i < len(lines) else 'end of output'!r}")
        i += 1
        if i >= len(lines) or lines[i] != "":
            raise Reject(f"line {i + 1}: the spike list does not end with an empty line")
        i += 1
    if buckets and not histfile:
        i = check_histogram(lines, i, threads, buckets, histofall)
    if breaktrace:
        m = re.fullmatch(r"# Thread Ids:((?: \d{5,})*)", lines[i]) if i < len(lines) else None
        if not m or len(m[1].split()) != threads:
            raise Reject(f"line {i + 1}: -b: not '# Thread Ids:' and {threads} %05d ids")
        tids = {int(v) for v in m[1].split()}
        i += 1
        if i < len(lines) and lines[i].startswith("# Break thread:"):
            b = re.fullmatch(r"# Break thread: (\d+)", lines[i])
            v = re.fullmatch(r"# Break value: (\d+)", lines[i + 1]) if i + 1 < len(lines) else None
            if not b or not v or int(b[1]) not in tids:
                raise Reject(f"line {i + 1}: -b: not '# Break thread: TID' (one of {sorted(tids)})"
                             " and '# Break value: V'")
            i += 2
    if i != len(lines):
        raise Reject(f"line {i + 1}: a line cyclictest does not print: {lines[i]!r}")


def check_histfile(text, threads, buckets, histofall=False):
    lines = split_lines(text)
    i = check_histogram(lines, 0, threads, buckets, histofall)
    if i != len(lines):
        raise Reject(f"line {i + 1}: a line cyclictest does not write: {lines[i]!r}")


def _keys(obj, expected, where):
    keys = [k for k, _ in obj]
    if keys != expected:
        raise Reject(f"{where}: keys {keys}, cyclictest writes {expected}")
    return dict(obj)


def check_json(text, threads, buckets=0, allow_urt=False, nsecs=False):
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
    # cyclictest writes its -N flag there.
    if d["resolution_in_ns"] != (1 if nsecs else 0) or isinstance(d["resolution_in_ns"], bool):
        raise Reject(f"resolution_in_ns {d['resolution_in_ns']!r}, cyclictest writes "
                     f"{1 if nsecs else 0}{' with -N' if nsecs else ' without -N'}")
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

# Every kind of output checked, by name: cyclictest's flags besides
# "-tN -i1000 -l100" (FILE: the --histfile or --json file, checked too) and
# how the parser reads the result. The fixtures are named KIND-tN.EXT
# (-p80 besides in two), and the live runs make each kind for 1, 2, 4 threads.
KINDS = {
    "q": dict(flags=["-q"]),
    "live": dict(flags=[], quiet=False),
    "live-h": dict(flags=["-h", "50"], quiet=False, buckets=50),
    "hist": dict(flags=["-q", "-h", "100"], buckets=100),
    "histfile": dict(flags=["-q", "-h", "100", "--histfile=FILE"], buckets=100, histfile=True),
    "json": dict(flags=["-q", "--json=FILE"], histfile=True),
    "json-h": dict(flags=["-q", "-h", "100", "--json=FILE"], buckets=100),
    "n-q": dict(flags=["-N", "-q"], nsecs=True),
    "n-live": dict(flags=["-N"], quiet=False, nsecs=True),
    "n-hist": dict(flags=["-N", "-q", "-h", "100"], buckets=100, nsecs=True),
    "n-json-h": dict(flags=["-N", "-q", "-h", "100", "--json=FILE"], buckets=100, nsecs=True),
    "hofall": dict(flags=["-q", "-H", "100"], buckets=100, histofall=True),
    "v-q": dict(flags=["-v", "-q"], verbose=True),
    "v": dict(flags=["-v"], quiet=False, verbose=True),
    "v-o-h": dict(flags=["-v", "-q", "-o", "10", "-h", "100"], buckets=100, verbose=True),
    "b-q": dict(flags=["-q", "-b", "1"], breaktrace=True),
    "m-live": dict(flags=["-M"], quiet=False, refresh_on_max=True),
    "spike-q": dict(flags=["-q", "--spike=1", "--spike-nodes=10"], spike=True),
}
# The fixtures every kind must have (by thread count); -p80 ones besides.
FIXTURE_THREADS = (1, 2, 4)


def _kind(name):
    k = dict(quiet=True, buckets=0, histfile=False, nsecs=False, histofall=False, verbose=False,
             breaktrace=False, refresh_on_max=False, spike=False)
    k.update(KINDS[name])
    return k


def check_output(kind, threads, stdout=None, extra=None, extra_ext=None, allow_urt=False):
    """Checks the stdout of a run of `kind`, and its --histfile or --json file."""
    k = _kind(kind)
    if stdout is not None:
        check_stdout(stdout, threads, k["quiet"], k["buckets"], k["histfile"], nsecs=k["nsecs"],
                     histofall=k["histofall"], verbose=k["verbose"], breaktrace=k["breaktrace"],
                     refresh_on_max=k["refresh_on_max"], spike=k["spike"])
    if extra is not None:
        if extra_ext == "hist":
            check_histfile(extra, threads, k["buckets"], k["histofall"])
        else:
            check_json(extra, threads, k["buckets"], allow_urt, nsecs=k["nsecs"])


def fixture_cases(directory):
    """(file, kind, threads, ext) for each fixture, by its name."""
    cases = []
    names = "|".join(re.escape(k) for k in sorted(KINDS, key=len, reverse=True))
    for name in sorted(os.listdir(directory)):
        m = re.fullmatch(rf"({names})(?:-p80)?-t(\d+)\.(txt|hist|json)", name)
        if not m:
            continue
        cases.append((os.path.join(directory, name), m[1], int(m[2]), m[3]))
    return cases


def check_file(path, kind, threads, ext, allow_urt=False):
    with open(path, newline="") as f:
        text = f.read()
    if ext == "txt":
        check_output(kind, threads, stdout=text)
    else:
        check_output(kind, threads, extra=text, extra_ext=ext, allow_urt=allow_urt)


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
    kinds = {(k, t) for _, k, t, _ in cases}
    missing = [(k, t) for k in KINDS for t in FIXTURE_THREADS if (k, t) not in kinds]
    if missing:
        print(f"FAIL: fixtures missing: {missing}", file=sys.stderr)
        return 1
    ok = True
    for path, kind, threads, ext in cases:
        try:
            check_file(path, kind, threads, ext)
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
    # -N, -H, -v, -b, -M, --spike: their structures, and only with the flag.
    ok &= must_reject("-N status lines read without -N (Act:/Avg: %8ld)",
                      lambda: check_output("q", 2, stdout=text("n-q-t2.txt")))
    ok &= must_reject("-N with us status lines (Act:/Avg: %5ld)",
                      lambda: check_output("n-q", 2, stdout=q2))
    ok &= must_reject("-N JSON read without -N (resolution_in_ns 1)",
                      lambda: check_output("json-h", 2, extra=text("n-json-h-t2.json"),
                                           extra_ext="json"))
    ok &= must_reject("JSON without -N read as -N (resolution_in_ns 0)",
                      lambda: check_output("n-json-h", 2, extra=text("json-h-t2.json"),
                                           extra_ext="json"))
    hofall = text("hofall-t2.txt")
    ok &= must_reject("-H's summary column read as -h",
                      lambda: check_output("hist", 2, stdout=hofall))
    ok &= must_reject("-h read as -H (no summary column)",
                      lambda: check_output("hofall", 2, stdout=text("hist-t2.txt")))
    bad_sum = re.sub(r"^(000000 \d+\t\d+\t)(\d+)$", lambda m: m[1] + f"{int(m[2]) + 1:06d}",
                     hofall, count=1, flags=re.M)
    ok &= must_reject("-H with a summary column that is not the sum",
                      lambda: check_output("hofall", 2, stdout=bad_sum))
    vq = text("v-q-t2.txt")
    ok &= must_reject("-v without its preamble",
                      lambda: check_output("v-q", 2, stdout=vq.split("\n", 2)[2]))
    ok &= must_reject("-v with a sample of a thread that does not exist",
                      lambda: check_output("v-q", 2, stdout=vq.replace(
                          "       1:       0:", "       2:       0:", 1)))
    ok &= must_reject("-v samples read without -v",
                      lambda: check_output("q", 2, stdout=vq))
    bq = text("b-q-t2.txt")
    ok &= must_reject("-b without '# Thread Ids:'",
                      lambda: check_output("b-q", 2, stdout=q2))
    ok &= must_reject("-b's lines read without -b",
                      lambda: check_output("q", 2, stdout=bq))
    ok &= must_reject("-b naming a break thread that is not one of the threads",
                      lambda: check_output("b-q", 2, stdout=re.sub(
                          r"# Break thread: \d+", "# Break thread: 99999999", bq)))
    ok &= must_reject("-M without the cursor moved back down",
                      lambda: check_output("m-live", 2, stdout=live))
    ok &= must_reject("-M's end read without -M",
                      lambda: check_output("live", 2, stdout=text("m-live-t2.txt")))
    sq = text("spike-q-t2.txt")
    ok &= must_reject("--spike's list read without --spike",
                      lambda: check_output("q", 2, stdout=sq))
    ok &= must_reject("--spike's list without its count",
                      lambda: check_output("spike-q", 2, stdout=re.sub(r"spikes = \d+\n", "",
                                                                       sq)))
    return 0 if ok else 1


# --------------------------------------------------------------- live runs

def live_modes(threads, work):
    """(kind, flags, the --histfile or --json file or None) per kind."""
    common = [f"-t{threads}", "-i1000", "-l100"]
    modes = []
    for kind, k in KINDS.items():
        flags, extra = [], None
        for f in k["flags"]:
            if "FILE" in f:
                extra = os.path.join(work, f"{kind}-t{threads}." +
                                     ("hist" if f.startswith("--histfile") else "json"))
                f = f.replace("FILE", extra)
            flags.append(f)
        modes.append((kind, common + flags, extra))
    return modes


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
                try:
                    extra = None
                    if extra_file is not None:
                        with open(extra_file, newline="") as f:
                            extra = f.read()
                    check_output(kind, threads, stdout=p.stdout.decode(), extra=extra,
                                 extra_ext=extra_file.rsplit(".", 1)[1] if extra_file else None,
                                 allow_urt=urt)
                    if urt and extra_file is not None and extra_file.endswith(".json") and \
                            '"urt": {' not in extra:
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
    p.add_argument("-N", action="store_true", help="the run had -N (ns)")
    p.add_argument("-H", action="store_true", help="the run had -H (the summary column)")
    p.add_argument("-v", action="store_true", help="the run had -v (per-sample output)")
    p.add_argument("-b", action="store_true", help="the run had -b (the break lines)")
    p.add_argument("-M", action="store_true", help="the run had -M (refresh on max)")
    p.add_argument("--spike", action="store_true", help="the run had --spike")
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
            check_stdout(text, a.t, a.q, a.hist_buckets, a.histfile, nsecs=a.N, histofall=a.H,
                         verbose=a.v, breaktrace=a.b, refresh_on_max=a.M, spike=a.spike)
        elif a.mode == "histfile":
            check_histfile(text, a.t, a.hist_buckets, a.H)
        else:
            check_json(text, a.t, a.hist_buckets, a.allow_urt_json, nsecs=a.N)
    except Reject as e:
        print(f"{a.path}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
