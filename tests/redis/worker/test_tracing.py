"""OpenTelemetry traces on real parts: a producer span's context travels in the envelope, a real
`taskqueue-worker --tracing parent|link` process exports one CONSUMER span per attempt over
OTLP/HTTP to a real HTTP receiver (decoding `ExportTraceServiceRequest`), with the producer's
span as parent or link, the messaging attributes, and the failure of a failed attempt."""

from __future__ import annotations

import gzip
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import redis
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import TracerProvider

from taskqueue import client
from taskqueue.wire import keys
from tests.helpers.wait import wait_for
from tests.redis.worker.procs import running

Q = "q"


class Receiver:
    """An OTLP/HTTP trace receiver on 127.0.0.1: every span it was sent."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        received = self.spans

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest.FromString(body)
                for rs in request.resource_spans:
                    for ss in rs.scope_spans:
                        received.extend(ss.spans)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    r = Receiver()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", r.url)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "test-worker")
    yield r
    r.server.shutdown()


def attrs(span: Any) -> dict[str, Any]:
    return {a.key: getattr(a.value, a.value.WhichOneof("value")) for a in span.attributes}


@pytest.mark.parametrize("mode", ["parent", "link"])
def test_one_consumer_span_per_attempt_with_the_producer_as_parent_or_link(
        redis_url: str, redis_sync: redis.Redis, receiver: Receiver, tmp_path: Path,
        mode: str) -> None:
    tracer = TracerProvider().get_tracer("producer")
    with tracer.start_as_current_span("enqueue") as producer:
        task_id = client.enqueue_sync(redis_sync, Q, "2")  # fail_first: attempt 1 fails
    element = redis_sync.lindex(Q, 0)
    assert keys.unwrap(element).traceparent.startswith("00-")
    produced = producer.get_span_context()
    with running(redis_url, "--queue", Q, "--handler", "tests.helpers.handlers:fail_first",
                 "--backoff", "0.05", "--tracing", mode, log_path=tmp_path / "worker.log"):
        wait_for("two spans", lambda: len(receiver.spans) >= 2, timeout=60)
    spans = sorted(receiver.spans, key=lambda s: attrs(s)["taskqueue.task.attempt"])
    assert [attrs(s)["taskqueue.task.attempt"] for s in spans] == [1, 2]
    for span in spans:
        a = attrs(span)
        assert span.kind == span.SPAN_KIND_CONSUMER and span.name == f"process {Q}"
        assert (a["messaging.system"], a["messaging.destination.name"],
                a["messaging.message.id"]) == ("taskqueue", Q, task_id)
        assert a["taskqueue.task.wait_seconds"] >= 0
        if mode == "parent":
            assert span.trace_id == produced.trace_id.to_bytes(16, "big")
            assert span.parent_span_id == produced.span_id.to_bytes(8, "big")
            assert not span.links
        else:
            assert span.trace_id != produced.trace_id.to_bytes(16, "big")
            assert not span.parent_span_id
            [link] = span.links
            assert link.span_id == produced.span_id.to_bytes(8, "big")
    failed, succeeded = spans
    assert failed.status.code == failed.status.STATUS_CODE_ERROR
    assert [e.name for e in failed.events] == ["exception"]
    assert succeeded.status.code != succeeded.status.STATUS_CODE_ERROR


BLOCK_OTEL = (
    "import sys\n"
    "class Block:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] == 'opentelemetry':\n"
    "            raise ModuleNotFoundError(f'No module named {name!r}')\n"
    "sys.meta_path.insert(0, Block())\n"
)
"""A prelude that makes OpenTelemetry not installed."""


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)


def test_a_worker_without_tracing_imports_no_opentelemetry() -> None:
    probe = ("import sys; from taskqueue.worker import command, runner, execute, lifecycle; "
             "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))")
    assert python(probe).stdout.strip() == "[]"


def test_without_the_extra_the_client_enqueues_and_tracing_names_the_extra(
        redis_url: str) -> None:
    produce = BLOCK_OTEL + (
        "from taskqueue import client\n"
        "print(client.plan('q', 'p').element)\n")
    done = python(produce)
    assert done.returncode == 0, done.stderr
    assert keys.unwrap(done.stdout.strip()).payload == "p"
    start = BLOCK_OTEL + (
        "import sys\n"
        "from taskqueue.worker import command\n"
        f"sys.exit(command.main(['--redis-url', {redis_url!r}, '--queue', 'q', "
        "'--handler', 'tests.helpers.handlers:record', '--tracing', 'parent']))\n")
    failed = python(start)
    assert failed.returncode == 2
    assert "pip install 'taskqueue-operator[otel]'" in failed.stderr
    assert len(failed.stderr.strip().splitlines()) == 1
