#!/usr/bin/env python3
"""Tests of urt-loadgen that run the binary (loadgen_test.cpp tests its parts).

  loadgen_test.py flags LOADGEN        bad command lines: exit 2, the message
                                       names the flag and the value; --help: 0
  loadgen_test.py failures LOADGEN     against fake servers run here: error
                                       replies, a server that never replies, one
                                       that closes its connections, a --server that
                                       dies before it listens and one that exits 3
                                       on SIGTERM: exit 1 and a message naming it,
                                       never a hang; a well-behaved fake: exit 0
  loadgen_test.py output SVG JSON      a run's --svg parses as XML (one series
                                       per server, one marker per point) and its
                                       --json as JSON, with zero errors

No latency or duration is asserted; the subprocess time limits only turn a
hang into a failure.
"""

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import xml.etree.ElementTree as ET

LIMIT = 60  # seconds a loadgen run may take before it counts as a hang
SVG_NS = "{http://www.w3.org/2000/svg}"

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what, file=sys.stderr)


def run(argv):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=LIMIT)
    return p.returncode, p.stdout, p.stderr


# ------------------------------------------------------------------ bad flags

def test_flags(loadgen):
    cases = [
        (["--points=10,abc", "--server=/bin/true"], '--points: "10,abc"'),
        (["--points=0", "--server=/bin/true"], '--points: "0"'),
        (["--duration=-1", "--server=/bin/true"], '--duration: "-1"'),
        (["--duration", "soon", "--server=/bin/true"], '--duration: "soon"'),
        (["--bulk=work:abc", "--server=/bin/true"], '--bulk: "work:abc"'),
        (["--bulk=fork:1", "--server=/bin/true"], '--bulk: "fork:1"'),
        (["--control-rate=0", "--server=/bin/true"], '--control-rate: "0"'),
        (["--bulk-conns=99999", "--server=/bin/true"], '--bulk-conns: "99999"'),
        (["--target=nohostport"], '--target: "nohostport"'),
        (["--target=x=127.0.0.1:70000"], '--target: "70000"'),
        (["--timeout=0", "--server=/bin/true"], '--timeout: "0"'),
        (["--rounds=0", "--server=/bin/true"], '--rounds: "0"'),
        (["--rounds=3", "--duration=1500", "--server=/bin/true"], "--rounds: 3 rounds of --duration 1500 s"),
        (["--spin-us=x", "--server=/bin/true"], '--spin-us: "x"'),
        (["--server=/nonexistent/urt-kv"], '--server: "/nonexistent/urt-kv" is not an executable file'),
        # Output paths are checked before the run, not after it.
        (["--server=/bin/true", "--json=/nonexistent/dir/r.json"],
         '--json: cannot write "/nonexistent/dir/r.json": No such file or directory'),
        (["--server=/bin/true", "--svg=/"], '--svg: "/" is a directory'),
        (["--server=/bin/true", "--client-cpus=4095"], "--client-cpus: CPU 4095 is not one this process may use"),
        (["--server=/bin/true", "--server-cpus=4000-4001"], "--server-cpus: CPU 4000 is not one"),
        (["--server=/bin/true", "--baseline=redis"], '--baseline: "redis" is not one of the servers'),
        (["--server=/bin/true", "--server-args=--mode=asio"], '--server-args: "--mode=asio" sets --mode'),
        (["--no-such-flag=1"], "unknown option --no-such-flag"),
        ([], "nothing to measure"),
    ]
    for args, want in cases:
        rc, out, err = run([loadgen] + args)
        check(rc == 2, "%s: exit %d, expected 2 (stderr: %s)" % (args, rc, err.strip()))
        check(want in err, "%s: stderr lacks %r: %r" % (args, want, err))
    rc, out, err = run([loadgen, "--help"])
    check(rc == 0 and "--server PATH" in out and "--points LIST" in out, "--help: exit %d, %r" % (rc, out[:200]))


# ------------------------------------------------------------- fake servers

def requests(buf):
    """Complete RESP arrays at the start of buf: (list of [words], bytes used)."""
    out, i = [], 0
    while True:
        if not buf.startswith(b"*", i):
            return out, i
        nl = buf.find(b"\r\n", i)
        if nl < 0:
            return out, i
        n, j, words = int(buf[i + 1:nl]), nl + 2, []
        for _ in range(n):
            nl2 = buf.find(b"\r\n", j)
            if nl2 < 0:
                return out, i
            size = int(buf[j + 1:nl2])
            if len(buf) < nl2 + 2 + size + 2:
                return out, i
            words.append(buf[nl2 + 2:nl2 + 2 + size])
            j = nl2 + 2 + size + 2
        out.append(words)
        i = j


def reply_for(words, behaviour):
    cmd = words[0].upper()
    if cmd == b"PING":
        return b"+PONG\r\n"
    if cmd == b"GET":
        return b"$3\r\nabc\r\n"
    if cmd == b"SET":
        return b"+OK\r\n"
    if cmd == b"WORK":
        return b"-ERR nope\r\n" if behaviour == "error" else b"+OK\r\n"
    if cmd == b"KEYS":
        return b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    return b"-ERR unknown command\r\n"


class FakeServer:
    """A RESP server on a thread; behaviour: ok, error (WORK gets -ERR),
    silent (reads, never replies), close (closes a connection at its first WORK),
    full (refuses every connection as a server at its client limit does)."""

    def __init__(self, behaviour):
        self.behaviour = behaviour
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.stopping = False
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        buf = b""
        with c:
            if self.behaviour == "full":
                # The refusal, then nothing more (kept open, so that the
                # client's requests do not draw a reset that drops it).
                c.sendall(b"-ERR max number of clients reached\r\n")
                while True:
                    try:
                        if not c.recv(65536):
                            return
                    except OSError:
                        return
            while True:
                try:
                    data = c.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                if self.behaviour == "silent":
                    continue
                buf += data
                reqs, used = requests(buf)
                buf = buf[used:]
                out = b""
                for words in reqs:
                    if self.behaviour == "close" and words[0].upper() == b"WORK":
                        c.sendall(out)
                        return
                    out += reply_for(words, self.behaviour)
                if out:
                    c.sendall(out)

    def close(self):
        self.stopping = True
        self.sock.close()


def serve_as_program(behaviour):
    """fake-server BEHAVIOUR [urt-kv's flags]: a --server stand-in that
    prints urt-kv's "listening on" line, serves like FakeServer("ok"), and
    exits 3 (exit3) or 0 (ok) on SIGTERM."""
    code = 3 if behaviour == "exit3" else 0
    signal.signal(signal.SIGTERM, lambda *_: os._exit(code))
    s = FakeServer("ok")
    print("listening on 127.0.0.1:%d" % s.port, flush=True)
    while True:
        signal.pause()


def short(extra):
    return ["--points=50", "--duration=0.2", "--warmup=0.05", "--capacity-duration=0.1",
            "--bulk-conns=2", "--control-conns=2", "--control-rate=200"] + extra


def test_failures(loadgen):
    # A well-behaved fake: exit 0, a table with its row.
    s = FakeServer("ok")
    rc, out, err = run([loadgen] + short(["--target=fake=127.0.0.1:%d" % s.port]))
    check(rc == 0, "ok fake: exit %d (stderr: %s)" % (rc, err.strip()))
    check("fake" in out and "50%" in out, "ok fake: no table row: %r" % out)
    s.close()

    s = FakeServer("error")
    rc, out, err = run([loadgen] + short(["--target=fake=127.0.0.1:%d" % s.port]))
    check(rc == 1, "error replies: exit %d, expected 1" % rc)
    check("error reply to WORK: ERR nope" in err, "error replies: not named: %r" % err)
    check("50%" in out, "error replies: the table is still printed: %r" % out)
    s.close()

    s = FakeServer("silent")
    rc, out, err = run([loadgen] + short(["--target=fake=127.0.0.1:%d" % s.port, "--timeout=0.3"]))
    check(rc == 1, "silent server: exit %d, expected 1" % rc)
    check("no reply for 0.3 s" in err, "silent server: not named: %r" % err)
    s.close()

    s = FakeServer("close")
    rc, out, err = run([loadgen] + short(["--target=fake=127.0.0.1:%d" % s.port]))
    check(rc == 1, "closing server: exit %d, expected 1" % rc)
    check("the server closed bulk connection" in err, "closing server: not named: %r" % err)
    s.close()

    # A server at its client limit: its refusal is quoted.
    s = FakeServer("full")
    rc, out, err = run([loadgen] + short(["--target=fake=127.0.0.1:%d" % s.port]))
    check(rc == 1, "full server: exit %d, expected 1" % rc)
    check("-ERR max number of clients reached" in err, "full server: refusal not quoted: %r" % err)
    s.close()

    # A port bound but not listening: connections are refused.
    with socket.socket() as idle:
        idle.bind(("127.0.0.1", 0))
        rc, out, err = run([loadgen] + short(["--target=gone=127.0.0.1:%d" % idle.getsockname()[1]]))
    check(rc == 1 and "cannot connect" in err and "Connection refused" in err, "refused: exit %d, %r" % (rc, err))

    # A --server that exits before it listens.
    rc, out, err = run([loadgen] + short(["--server=/bin/false", "--modes=asio"]))
    check(rc == 1, "/bin/false: exit %d, expected 1" % rc)
    check("exited with status 1 before it printed its port" in err, "/bin/false: not named: %r" % err)

    # --server stand-ins: one exits 0 on SIGTERM, one 3.
    with tempfile.TemporaryDirectory() as tmp:
        for behaviour, want_rc in (("ok", 0), ("exit3", 1)):
            prog = os.path.join(tmp, "fake-kv-" + behaviour)
            with open(prog, "w") as f:
                f.write('#!/bin/sh\nexec "%s" "%s" fake-server %s "$@"\n'
                        % (sys.executable, os.path.realpath(__file__), behaviour))
            os.chmod(prog, os.stat(prog).st_mode | stat.S_IXUSR)
            rc, out, err = run([loadgen] + short(["--server=" + prog]))
            check(rc == want_rc, "--server %s: exit %d, expected %d (stderr: %s)" % (behaviour, rc, want_rc, err))
            if behaviour == "exit3":
                check("exited with status 3 on SIGTERM (expected exit 0)" in err,
                      "--server exit3: not named: %r" % err)
            check("urt" in out and "asio" in out, "--server %s: both rows: %r" % (behaviour, out))


# ---------------------------------------------------------------- output

def test_output(svg_path, json_path):
    with open(json_path) as f:
        data = json.load(f)
    names = [s["name"] for s in data["servers"]]
    check(sorted(names) == ["asio", "urt"], "json: servers %r" % names)
    check(data["baseline"] == "asio" and data["capacity"] > 0, "json: baseline/capacity")
    rounds = data["rounds"]
    check(rounds == 2, "json: rounds %r, the short run asks for 2" % rounds)
    for s in data["servers"]:
        check(s["failure"] is None, "json: %s failed: %s" % (s["name"], s["failure"]))
        check(s["setup_errors"] == 0, "json: %s setup errors" % s["name"])
        check(s["capacity"] > 0, "json: %s capacity" % s["name"])
        check(len(s["points"]) == 2, "json: %s points" % s["name"])
        for p in s["points"]:
            check(p["ran"], "json: %s %s%% did not run" % (s["name"], p["percent"]))
            check(p["control_errors"] == 0 and p["bulk_errors"] == 0, "json: %s errors" % s["name"])
            check(p["control"]["samples"] > 0 and p["bulk_sent"] > 0, "json: %s no samples" % s["name"])
            check(p["control"]["p50_us"] <= p["control"]["p99_us"] <= p["control"]["p999_us"]
                  <= p["control"]["max_us"], "json: %s percentiles out of order" % s["name"])
            # The point pools its rounds' samples: its nearest-rank p99 lies
            # between the lowest and the highest round's own.
            by_round = p["control_p99_us_by_round"]
            check(len(by_round) == rounds and all(v > 0 for v in by_round),
                  "json: %s %s%%: p99 by round %r" % (s["name"], p["percent"], by_round))
            if len(by_round) == rounds:
                check(min(by_round) <= p["control"]["p99_us"] <= max(by_round),
                      "json: %s %s%%: pooled p99 %r outside its rounds' %r"
                      % (s["name"], p["percent"], p["control"]["p99_us"], by_round))

    root = ET.parse(svg_path).getroot()  # raises on XML that is not well-formed
    check(root.tag == SVG_NS + "svg", "svg: root is %s" % root.tag)
    series = {g.get("data-server"): g for g in root.iter(SVG_NS + "g") if g.get("data-server")}
    check(sorted(series) == ["asio", "urt"], "svg: series %r" % sorted(series))
    for name, g in series.items():
        lines = list(g.iter(SVG_NS + "polyline"))
        check(len(lines) == 1 and len(lines[0].get("points").split()) == 2,
              "svg: %s: one polyline of 2 points" % name)
        marks = [e for e in g if e.tag in (SVG_NS + "circle", SVG_NS + "rect")]
        check(len(marks) == 2, "svg: %s: %d markers" % (name, len(marks)))
    texts = " ".join("".join(t.itertext()) for t in root.iter(SVG_NS + "text"))
    for want in ("control p99", "bulk offered load", "urt-kv --mode urt", "urt-kv --mode asio"):
        check(want in texts, "svg: no text %r" % want)


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "fake-server":
        serve_as_program(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "flags":
        test_flags(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "failures":
        test_failures(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "output":
        test_output(sys.argv[2], sys.argv[3])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    if failures:
        print("%d check(s) failed" % len(failures), file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
