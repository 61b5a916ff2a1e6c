#!/usr/bin/env python3
"""Tests of bench/compare-cyclictest (ctest bench/compare-cyclictest/*).

  compare_cyclictest_test.py percentiles SCRIPT
      The merged statistics alone, on a known sample set with a small
      histogram: nearest-rank percentiles are exact, and a rank that falls
      among the overflows is reported as beyond the histogram, never as the
      max.
  compare_cyclictest_test.py run SCRIPT URT_CYCLICTEST
      A short real run (root and rt-tests needed; exit 77 = skipped
      otherwise): three columns in the table and the JSON, every column
      with all its cycles, an SVG that parses, has three curves and their
      percentile marks, uses only what every renderer draws alike, and, where
      rsvg-convert and ImageMagick are both installed, renders the same in
      both.
"""

import contextlib
import importlib.machinery
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

SKIP = 77
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAILED: {what}", file=sys.stderr)


def load_script(path):
    loader = importlib.machinery.SourceFileLoader("compare_cyclictest", path)
    spec = importlib.util.spec_from_loader("compare_cyclictest", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_percentiles(script):
    cc = load_script(script)
    m = cc.merged(20)  # buckets 0..19 us
    # 1000 samples: 500 at 3 us, 480 at 7 us, 10 at 19 us, 10 beyond the
    # histogram (cycles counts them, the histogram does not).
    doc = {"thread": {"0": {"cycles": 1000, "min": 3, "max": 371, "avg": 10.0,
                            "histogram": {"3": 500, "7": 480, "19": 10}}}}
    m.add_json(doc, "synthetic")
    check(m.cycles == 1000 and m.overflows == 10, f"cycles/overflows: {m.cycles}/{m.overflows}")
    check(m.percentile(0.50) == 3, f"p50 {m.percentile(0.50)} != 3 (rank 500 is the last 3)")
    check(m.percentile(0.501) == 7, f"p50.1 {m.percentile(0.501)} != 7")
    check(m.percentile(0.98) == 7, f"p98 {m.percentile(0.98)} != 7 (rank 980)")
    check(m.percentile(0.99) == 19, f"p99 {m.percentile(0.99)} != 19 (rank 990)")
    check(m.percentile(0.999) is None, f"p99.9 {m.percentile(0.999)}: rank 999 is an overflow")
    check(m.percentile_text(0.999) == ">19", f"p99.9 text {m.percentile_text(0.999)!r}")
    check(m.percentile_text(0.5) == "3", f"p50 text {m.percentile_text(0.5)!r}")
    # Merging a second segment and thread keeps every count.
    doc2 = {"thread": {"0": {"cycles": 2, "min": 1, "max": 1, "avg": 1.0, "histogram": {"1": 2}},
                       "1": {"cycles": 0, "min": 0, "max": 0, "avg": 0.0, "histogram": {}}}}
    m.add_json(doc2, "synthetic2")
    check(m.cycles == 1002 and m.min == 1 and m.max == 371, "merge of a second segment")
    check(m.percentile(0.001) == 1, f"lowest rank {m.percentile(0.001)} != 1")
    empty = cc.merged(20)
    check(empty.percentile(0.5) is None and empty.percentile_text(0.5) == "-", "no samples")

    # Command lines the script refuses: exit 2, the flag and the value named.
    for argv, words in ((["--segments", "4"], "--segments: '4' is not a multiple of 3"),
                        (["--segments", "0"], "--segments: '0'"),
                        (["-h", "0"], "-h: '0'"),
                        (["--xmax", "-5"], "--xmax"),
                        (["-D", "ten"], "-D: 'ten'"),
                        (["-p", "100"], "-p: '100'"),
                        (["--", "-q"], "'-q' after --"),
                        # -N would make every figure nanoseconds under "(us)" labels.
                        (["--", "-N"], "'-N' after --"),
                        (["--urt-args=--nsecs"], "'--nsecs' in --urt-args"),
                        (["--kernel-args=-i200"], "'-i200' in --kernel-args: -i"),
                        (["--", "-t2"], "(use its own -t)"),
                        # getopt_long's bundles and abbreviations, as cyclictest reads them.
                        (["--", "-mN"], "'-mN' after --: -N"),
                        (["--kernel-args=--nsec"], "'--nsec' in --kernel-args: --nsecs"),
                        (["--", "--loop=5"], "--loops"),
                        (["--urt-args=--inter=200"], "--interval"),
                        (["--", "-S"], "'-S' after --"),
                        (["--svg", "/nonexistent-dir/x.svg"], "--svg: '/nonexistent-dir/x.svg'"),
                        (["--json", "/nonexistent-dir/x.json"], "--json: '/nonexistent-dir/x.json'")):
        err = io.StringIO()
        code = None
        with contextlib.redirect_stderr(err):
            try:
                cc.parse_args(argv)
            except SystemExit as e:
                code = e.code
        check(code == 2 and words in err.getvalue(),
              f"{argv}: exit 2 naming {words!r}, got {code}: {err.getvalue().strip()[-200:]}")


def svg_checks(path, columns):
    tree = ET.parse(path)  # raises on malformed XML
    ns = "{http://www.w3.org/2000/svg}"
    root = tree.getroot()
    curves = [e for e in root.iter(ns + "polyline") if e.get("class") == "series"]
    check(len(curves) == columns, f"{len(curves)} curves in the SVG, expected {columns}")
    check(all(e.get("fill") == "none" for e in curves), "a curve is filled (fills hide curves)")
    marks = [e for e in root.iter(ns + "polygon") if e.get("class") == "mark"]
    check(len(marks) >= columns, f"{len(marks)} percentile marks, expected at least {columns}")
    text = open(path).read()
    check("fill-opacity" not in text, "fill-opacity used (ignored by some renderers)")
    for e in root.iter():
        t = e.get("transform") or ""
        if "rotate(" in t:
            args = t.split("rotate(", 1)[1].split(")", 1)[0].replace(",", " ").split()
            check(len(args) == 1, f"three-argument rotate() in {t!r} (dropped by some renderers)")
    labels = "".join(e.text or "" for e in root.iter(ns + "text"))
    for word in ("count (log scale)", "latency (us)", "kernel", "like-for-like", "urt default",
                 "overflows"):
        check(word in labels, f"the SVG has no text {word!r}")


def render_checks(svg, work):
    rsvg, im, compare = (shutil.which(t) for t in ("rsvg-convert", "convert", "compare"))
    if not (rsvg and im and compare):
        print("render: rsvg-convert or ImageMagick not installed; the render comparison is "
              "skipped")
        return
    a, b = os.path.join(work, "rsvg.png"), os.path.join(work, "im.png")
    subprocess.run([rsvg, svg, "-o", a], check=True, timeout=60)
    subprocess.run([im, svg, b], check=True, timeout=60)
    # AE: the number of pixels that differ by more than the fuzz.
    r = subprocess.run([compare, "-metric", "AE", "-fuzz", "10%", a, b, os.path.join(work,
                        "diff.png")], capture_output=True, text=True, timeout=60)
    try:
        differing = float(r.stderr.split()[0])
    except (IndexError, ValueError):
        check(False, f"compare printed no pixel count: {r.stderr!r}")
        return
    w, h = 960, 0
    root = ET.parse(svg).getroot()
    w, h = int(root.get("width")), int(root.get("height"))
    share = differing / (w * h)
    print(f"render: rsvg-convert and ImageMagick differ in {differing:.0f} pixels "
          f"({100 * share:.3f}%)")
    check(share < 0.01, f"rsvg-convert and ImageMagick renderings differ in {100 * share:.2f}% "
          "of the pixels")


def test_run(script, urt):
    if os.geteuid() != 0 or not shutil.which("cyclictest"):
        print("skipped: the kernel's cyclictest needs root (SCHED_FIFO) and rt-tests")
        return SKIP
    with tempfile.TemporaryDirectory(prefix="compare-cyclictest-test-") as work:
        svg, js = os.path.join(work, "c.svg"), os.path.join(work, "c.json")
        cmd = [sys.executable, script, f"--urt={urt}", "-t", "2", "-i", "2000", "-D", "0.6s",
               "--segments", "3", f"--svg={svg}", f"--json={js}"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        print(r.stdout)
        check(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
        if r.returncode != 0:
            return 1
        lines = r.stdout.splitlines()
        header = next((l for l in lines if "like-for-like" in l and "urt default" in l), None)
        check(header is not None, "no table header with the three columns")
        for row in ("p50 (us)", "p99 (us)", "p99.9 (us)", "CPU/wall (%)"):
            line = next((l for l in lines if l.startswith(row)), "")
            check(len(line[len(row):].split()) == 5, f"row {row!r} has not 3 columns + 2 ratios: "
                  f"{line!r}")
        doc = json.load(open(js))
        cols = doc["columns"]
        check(sorted(cols) == ["kernel", "urt_default", "urt_lfl"], f"JSON columns {sorted(cols)}")
        loops = round(0.6 / 3 * 1e6 / 2000)
        for name, c in cols.items():
            check(c["cycles"] == 2 * loops, f"{name}: {c['cycles']} cycles, expected {2 * loops}")
            check(c["segments"] == 1, f"{name}: {c['segments']} segments")
            check(c["p50"] is not None and c["min"] <= c["p50"] <= c["max"],
                  f"{name}: p50 {c['p50']} outside min..max")
        svg_checks(svg, 3)
        render_checks(svg, work)
    return 0


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "percentiles":
        test_percentiles(sys.argv[2])
        rc = 0
    elif len(sys.argv) >= 4 and sys.argv[1] == "run":
        rc = test_run(sys.argv[2], sys.argv[3])
        if rc == SKIP:
            return SKIP
    else:
        print(__doc__, file=sys.stderr)
        return 2
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print("all checks passed")
    return rc


if __name__ == "__main__":
    sys.exit(main())
