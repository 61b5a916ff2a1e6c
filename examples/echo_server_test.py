#!/usr/bin/env python3
"""CTest driver of urt-echo-server (examples/echo_server.cpp).

    echo_server_test.py PATH-TO-urt-echo-server

Starts the server on port 0 and reads the port it prints; checks that two
connections open at once each get back exactly what they sent (16 KiB, more
than one read of the server); sends SIGTERM while one connection is still
open and checks that the server closes it and exits 0. Then the same with
SIGINT and no connection. Then checks that bad ports exit 2 with a message
naming PORT and the value. Every wait is bounded, so a server that does not
echo or does not stop fails the test instead of hanging it.
"""

import re
import signal
import socket
import subprocess
import sys

WAIT_S = 10  # for any one reply, connection or exit


def fail(message):
    print(f"echo_server_test: {message}", file=sys.stderr)
    sys.exit(1)


def start(server):
    proc = subprocess.Popen([server, "0"], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()  # the server flushes it once it listens
    match = re.fullmatch(r"listening on 127\.0\.0\.1:(\d+)\n", line)
    if not match:
        proc.kill()
        proc.wait()
        fail(f"expected 'listening on 127.0.0.1:<port>', got {line!r}")
    return proc, int(match.group(1))


def connect(port):
    return socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)


def expect_echo(conn, payload):
    conn.sendall(payload)
    got = b""
    try:
        while len(got) < len(payload):
            chunk = conn.recv(65536)
            if not chunk:
                break
            got += chunk
    except socket.timeout:
        pass
    if got != payload:
        fail(f"sent {len(payload)} bytes, got {len(got)} back within {WAIT_S} s "
             f"(first ones: {got[:16]!r})")


def expect_exit(proc, how):
    try:
        code = proc.wait(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        fail(f"still running {WAIT_S} s after {how}")
    if code != 0:
        fail(f"exit code {code} after {how}, expected 0")


def run(server):
    # SIGTERM with a connection open.
    proc, port = start(server)
    try:
        first, second = connect(port), connect(port)
        expect_echo(first, bytes(range(256)) * 64)
        expect_echo(second, b"hello, urt\n")
        expect_echo(first, b"again")
        first.close()
        proc.send_signal(signal.SIGTERM)
        expect_exit(proc, "SIGTERM")
        try:
            closed = second.recv(16) == b""
        except ConnectionResetError:
            closed = True
        if not closed:
            fail("the connection open at SIGTERM was not closed")
        second.close()

        # SIGINT with none open.
        proc, port = start(server)
        with connect(port) as conn:
            expect_echo(conn, b"x")
        proc.send_signal(signal.SIGINT)
        expect_exit(proc, "SIGINT")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    # Bad ports: exit 2, the argument and its value named.
    for bad in ["65536", "99999999999", "http", "80x", "-1", ""]:
        result = subprocess.run([server, bad], capture_output=True, text=True, timeout=WAIT_S)
        if result.returncode != 2 or f'PORT "{bad}"' not in result.stderr:
            fail(f"PORT {bad!r}: exit {result.returncode}, stderr {result.stderr!r}; "
                 f'expected exit 2 and a message naming PORT "{bad}"')
    # --help: the usage on stdout, exit 0.
    result = subprocess.run([server, "--help"], capture_output=True, text=True, timeout=WAIT_S)
    if result.returncode != 0 or not result.stdout.startswith("usage: urt-echo-server PORT"):
        fail(f"--help: exit {result.returncode}, stdout {result.stdout!r}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        fail("usage: echo_server_test.py PATH-TO-urt-echo-server")
    run(sys.argv[1])
    print("echo_server_test: echoed, stopped on SIGTERM and SIGINT, bad ports refused")
