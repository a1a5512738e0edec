"""`taskqueue enqueue`'s input, on real processes: payloads that are not UTF-8 (arguments and
stdin) reach the handler byte for byte; a push stopped midway (Redis refuses, Redis dies)
prints the ids of the tasks pushed and says which inputs were not pushed."""

from __future__ import annotations

import io
import re
import subprocess
from pathlib import Path

import pytest
import redis

from taskqueue.wire import keys
from tests.fixtures.redis_server import RedisServer
from tests.helpers import handlers
from tests.helpers.cli import Run, console_script
from tests.helpers.wait import wait_for
from tests.helpers.worker import MakeWorker


def enqueue(url: str, *args: bytes | str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*console_script(), "enqueue", "--redis-url", url, *args],
                          input=stdin, capture_output=True, timeout=300, check=False)


def recorded(url: str, n: int) -> list[bytes]:
    raw = redis.Redis.from_url(url)
    wait_for(f"{n} task(s) recorded", lambda: raw.llen(handlers.DONE) >= n, timeout=60)
    return list(raw.lrange(handlers.DONE, 0, -1))


ARGUMENTS = [b"x\xffy", b"\xc3( broken", "caf\u00e9".encode(), b'\xfe"quoted\\" \t']


@pytest.mark.parametrize("options", [
    pytest.param([], id="plain"),
    pytest.param(["--in", "0.2s"], id="scheduled"),
    pytest.param(["--unique-for", "1h"], id="unique"),
])
def test_arguments_that_are_not_utf8_reach_the_handler_byte_for_byte(
        redis_url: str, handler_env: None, make_worker: MakeWorker,
        options: list[str]) -> None:
    result = enqueue(redis_url, "jobs", *options, *ARGUMENTS)
    assert result.returncode == 0, result.stderr
    assert b"Traceback" not in result.stderr
    assert len(result.stdout.split()) == len(ARGUMENTS)
    make_worker(queues=[{"key": "jobs"}])
    assert sorted(recorded(redis_url, len(ARGUMENTS))) == sorted(ARGUMENTS)


def _lines(n: int, *, bad_at: int) -> tuple[bytes, list[bytes]]:
    """stdin of `n` payload lines (line `bad_at` is not UTF-8, every 7th ends in CRLF, blank
    lines between some), and the payloads it holds."""
    text, payloads = b"", []
    for i in range(1, n + 1):
        payload = b"line %d \xff\xfe not utf-8" % i if i == bad_at else b"line %d" % i
        payloads.append(payload)
        text += payload + (b"\r\n" if i % 7 == 0 else b"\n") + (b"\n" if i % 100 == 0 else b"")
    return text, payloads


def test_stdin_lines_that_are_not_utf8_are_all_pushed(redis_url: str, handler_env: None,
                                                      make_worker: MakeWorker) -> None:
    stdin, payloads = _lines(1500, bad_at=1200)
    result = enqueue(redis_url, "jobs", "-", stdin=stdin)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.split()) == 1500
    make_worker(queues=[{"key": "jobs"}], worker={"concurrency": 8})
    assert sorted(recorded(redis_url, 1500)) == sorted(payloads)


def test_raw_pushes_the_exact_bytes(redis_url: str) -> None:
    result = enqueue(redis_url, "--raw", "jobs", b"arg \xff", "-", stdin=b"in \xfe\r\nnext\n")
    assert result.returncode == 0, result.stderr
    raw = redis.Redis.from_url(redis_url)
    assert raw.lrange("jobs", 0, -1)[::-1] == [b"arg \xff", b"in \xfe", b"next"]


def test_a_text_stdin_is_read_as_its_bytes(cli: Run, redis_url: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("a\udcffb\n"))  # an in-process caller's
    assert cli("enqueue", "--redis-url", redis_url, "--raw", "jobs", "-").code == 0
    assert redis.Redis.from_url(redis_url).lrange("jobs", 0, -1) == [b"a\xffb"]


@pytest.mark.parametrize(("args", "message"), [
    pytest.param(["--id", b"order-\xff", "p"], "--id 'order-\\udcff' is not UTF-8 text",
                 id="id-not-text"),
    pytest.param([b"jobs\xff"], "is not a valid queue key (1-512 characters of UTF-8 text",
                 id="key-not-text"),
])
def test_names_that_are_not_text_are_refused(redis_url: str, args: list[bytes | str],
                                             message: str) -> None:
    key = [] if args[0] == b"jobs\xff" else ["jobs"]
    result = enqueue(redis_url, *key, *args, *([] if key else ["p"]))
    assert result.returncode == 2
    assert result.stderr.decode("utf-8", "replace").startswith("taskqueue: ")
    assert message in result.stderr.decode("utf-8", "surrogateescape")
    assert result.stderr.count(b"\n") == 1
    assert redis.Redis.from_url(redis_url).dbsize() == 0


def _numbers(spans: str) -> set[int]:
    """The stdin line numbers of "1-3, 7"."""
    numbers: set[int] = set()
    for span in spans.split(", "):
        first, _, last = span.partition("-")
        numbers.update(range(int(first), int(last or first) + 1))
    return numbers


def _report(stderr: bytes) -> dict[str, set[int]]:
    """The stdin lines the error line puts in each group (refused, not sent, ...)."""
    groups: dict[str, set[int]] = {}
    for spans, what in re.findall(r"stdin lines? ([\d, -]+): ([a-z ]+)", stderr.decode()):
        groups.setdefault(what.strip(), set()).update(_numbers(spans))
    return groups


def _in_queue(server: RedisServer, key: str) -> list[int]:
    """The stdin line numbers of the tasks in `key` (payload "line <n> ..."), oldest first."""
    raw = redis.Redis.from_url(server.url)
    payloads = [keys.unwrap(e.decode("utf-8", "surrogateescape")).payload
                for e in reversed(raw.lrange(key, 0, -1))]
    return [int(p.split()[1]) for p in payloads]


def test_a_push_refused_midway_prints_what_was_pushed(
        redis_factory: type[RedisServer]) -> None:
    """Redis refuses writes once it is full. The pipelined batch may still land a few later
    lines when memory drops back (replies freed), so the spec is not "a prefix was pushed" but:
    the ids on stdout are exactly the tasks in the queue, in stdin order, and the error line
    names every other line as refused or not sent and asks for exactly those again."""
    server = redis_factory()
    raw = redis.Redis.from_url(server.url)
    used = int(raw.info("memory")["used_memory"])
    raw.config_set("maxmemory", used + 2_000_000)
    raw.config_set("maxmemory-policy", "noeviction")
    total = 6000
    stdin = b"".join(b"line %d %s\n" % (i, b"x" * 1000) for i in range(1, total + 1))
    result = enqueue(server.url, "jobs", "-", stdin=stdin)
    assert result.returncode == 1, result.stderr
    [line] = result.stderr.decode().splitlines()
    queued = _in_queue(server, "jobs")
    ids = result.stdout.decode().split()
    assert 0 < len(queued) == len(ids) < total
    assert queued == sorted(queued)  # stdin order
    assert line.startswith("taskqueue: Redis error: command not allowed when used memory ")
    assert f"; pushed {len(ids)} of {total} task(s) (their ids are on stdout);" in line
    missing = set(range(1, total + 1)) - set(queued)
    groups = _report(result.stderr)
    assert groups["refused"] | groups.get("not sent", set()) == missing
    assert not groups["refused"] & groups.get("not sent", set())
    again = re.search(r"; push stdin lines? ([\d, -]+) again$", line)
    assert again is not None, line
    assert _numbers(again.group(1)) == missing


def test_redis_dying_midway_prints_what_was_pushed(redis_factory: type[RedisServer],
                                                   tmp_path: Path) -> None:
    server = redis_factory(appendonly=True)  # every reply is on disk: it outlives the kill
    total = 200_000
    lines = tmp_path / "payloads"
    lines.write_bytes(b"".join(b"line %d \xff\n" % i for i in range(1, total + 1)))
    with lines.open("rb") as stdin:
        proc = subprocess.Popen([*console_script(), "enqueue", "--redis-url", server.url,
                                 "jobs", "-"], stdin=stdin, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
    watcher = redis.Redis.from_url(server.url)
    wait_for("the first batch pushed", lambda: watcher.llen("jobs") >= 1000, timeout=120)
    watcher.execute_command("CLIENT", "PAUSE", 60_000, "WRITE")  # the next batch waits...
    wait_for("a batch held by the pause", lambda: any(
        "b" in c["flags"] and c["cmd"] == "lpush" for c in watcher.client_list()), timeout=60)
    server.stop(kill=True)  # ...and never gets one
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 4, err
    [line] = err.decode().splitlines()
    assert line.startswith(f"taskqueue: cannot reach Redis at {server.url}")
    server.start()
    in_queue = set(_in_queue(server, "jobs"))
    ids = out.decode().split()
    groups = _report(err)
    no_reply = groups["sent without a reply"]
    assert f"; pushed {len(ids)} of {total} task(s) (their ids are on stdout);" in line
    assert set(range(1, len(ids) + 1)) <= in_queue  # every id printed was pushed
    assert in_queue - set(range(1, len(ids) + 1)) <= no_reply  # the rest only if no reply
    assert no_reply == set(range(len(ids) + 1, len(ids) + 1 + len(no_reply)))
    assert 0 < len(no_reply) <= 1000
    assert groups["not sent"] == set(range(len(ids) + len(no_reply) + 1, total + 1))
    raw = redis.Redis.from_url(server.url)
    stored = {keys.unwrap(e.decode("utf-8", "surrogateescape")).id
              for e in raw.lrange("jobs", 0, -1)}
    assert set(ids) <= stored
