"""OpenTelemetry traces of the tasks (spec.worker.tracing; the `taskqueue-operator[otel]` extra).

Imported only when tracing is on, so a worker without it pays nothing (not even the import).
`wrap` puts a handler in a CONSUMER span per attempt, named `process <queue>`, with the
messaging semantic conventions' attributes (`messaging.system` "taskqueue",
`messaging.operation.type`/`.name` "process", `messaging.destination.name` the queue key,
`messaging.message.id` the task id) and the project's `taskqueue.task.attempt` and
`taskqueue.task.wait_seconds` (enqueue to this start; on a retry, the enqueue time is the first
one). The producer's span, carried in the envelope as W3C `traceparent` (+ `tracestate`), becomes
the span's parent ("parent") or a link of a new trace ("link"). A failed attempt records the
exception and an ERROR status. The exporter is the standard OTLP/HTTP one, configured by the
standard environment variables (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
OTEL_EXPORTER_OTLP_HEADERS, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_BSP_*...), behind a
BatchSpanProcessor, flushed when the process exits.
"""

from __future__ import annotations

import atexit
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Link, SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from taskqueue.worker.handlers import AsyncHandler, Handler, TaskContext

SYSTEM = "taskqueue"
_PROPAGATOR = TraceContextTextMapPropagator()


def setup() -> trace.Tracer:
    """The global tracer provider with the OTLP/HTTP exporter (OTEL_* variables), once."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider(resource=Resource.create(
            {"service.name": "taskqueue-worker"} | _service_from_env()))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
        atexit.register(provider.shutdown)
    return trace.get_tracer("taskqueue.worker")


def _service_from_env() -> dict[str, str]:
    import os

    name = os.environ.get("OTEL_SERVICE_NAME")
    return {"service.name": name} if name else {}


class Attempt:
    """How one attempt's span is started (pure apart from the clock)."""

    def __init__(self, tracer: trace.Tracer, *, link: bool) -> None:
        self.tracer = tracer
        self.link = link

    @contextmanager
    def span(self, ctx: TaskContext) -> Iterator[trace.Span]:
        carrier = {"traceparent": ctx.traceparent} if ctx.traceparent else {}
        producer = _PROPAGATOR.extract(carrier) if carrier else None
        parent, links = producer, None
        if self.link and producer is not None:
            linked = trace.get_current_span(producer).get_span_context()
            parent, links = trace.set_span_in_context(trace.INVALID_SPAN), [Link(linked)]
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM, "messaging.operation.type": "process",
            "messaging.operation.name": "process", "messaging.destination.name": ctx.queue,
            "taskqueue.task.attempt": ctx.attempt}
        if ctx.id:
            attributes["messaging.message.id"] = ctx.id
        if ctx.enqueued_at:
            attributes["taskqueue.task.wait_seconds"] = max(0.0, time.time() - ctx.enqueued_at)
        with self.tracer.start_as_current_span(
                f"process {ctx.queue}", context=parent, kind=SpanKind.CONSUMER, links=links,
                attributes=attributes, record_exception=True,
                set_status_on_exception=True) as span:
            yield span


class TracedAsyncHandler(AsyncHandler):
    """A coroutine handler whose every attempt runs in its span."""

    def __init__(self, inner: AsyncHandler, attempt: Attempt) -> None:
        self.__dict__.update(inner.__dict__)
        self._inner = inner
        self._attempt = attempt

    def __call__(self, payload: str, context: TaskContext) -> None:
        with self._attempt.span(context):
            self._inner(payload, context)

    async def run(self, payload: str, context: TaskContext) -> None:
        with self._attempt.span(context):
            await self._inner.run(payload, context)


def wrap(handler: Handler, *, producer_span: str) -> Handler:
    """`handler` with a CONSUMER span per attempt (`producer_span`: "parent" or "link")."""
    attempt = Attempt(setup(), link=producer_span == "link")
    if isinstance(handler, AsyncHandler):
        return TracedAsyncHandler(handler, attempt)

    def traced(payload: str, context: TaskContext) -> None:
        with attempt.span(context):
            handler(payload, context)

    return traced
