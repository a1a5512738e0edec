"""Helpers of the metrics-endpoint tests: does a /metrics endpoint answer at host:port."""

from __future__ import annotations

import socket
import subprocess
import time


def answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1) as conn:
            conn.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            return conn.recv(12).startswith(b"HTTP/1.")
    except OSError:
        return False


def wait_listening(host: str, port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while not answers(host, port):
        assert proc.poll() is None, f"exited {proc.returncode}"
        assert time.monotonic() < deadline, f"nothing on {host}:{port}"
        time.sleep(0.1)
