"""TaskQueue manifests as a person (or a template engine) may write them, as Hypothesis
strategies: a valid manifest with a few fields changed to values of the wrong type, out of
range, huge, negative, NaN or infinite, keys that collide or are not keys at all, fields missing
or unknown, then rendered as JSON or YAML, sometimes with a YAML oddity (1.1 booleans, `.inf`,
anchors, duplicate keys, tags, tabs, a BOM, bytes that are not UTF-8, a cut-off file).

Every Redis URL names a loopback address: REDIS stands for the test's redis-server (replaced
when the file is written), the other ports are closed.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import yaml
from hypothesis import strategies as st

REDIS = "redis://@REDIS@/0"
"""The test's redis-server (`render` puts its host:port in)."""

Json = Any

NUMBERS = st.one_of(
    st.integers(-3, 12),
    st.sampled_from([0, 1, -1, 0.5, -0.0, 1e-9, 2**31, 2**53 + 1, 2**63, 10**20, 10**400, 1e308,
                     604800, 604801, 31536000, 31536001, 3600, 10000, 10001]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["5", "1e3", "abc", "", True, False, None, [], {}, [1], {"a": 1}]),
)
STRING_KEYS = st.one_of(
    st.sampled_from(["q", "r", "z", "q:dead", "r:dead", "q:delayed", "q:stats", "q:workers",
                     "q:processing:w1", "q:unique:x", "q:done:1", "p", "p:delayed", "{t}q",
                     "{t}r", "{u}q", "", " ", "a b", "é", "q\n", "tab\there", "x" * 512,
                     "x" * 513, "\u200b", "\x00"]),
    st.text(max_size=8),
)
KEYS = st.one_of(STRING_KEYS, st.sampled_from([5, None, True, [], {}]))
URLS = st.sampled_from([
    REDIS, REDIS + "?db=1", REDIS + "?socket_timeout=2", REDIS + "?bogus=1",
    REDIS + "?ssl_ca_certs=/x", REDIS + "?password=pw", REDIS + "?db=x",
    "redis://:pw@127.0.0.1:1/0", "redis://u:p%40ss@127.0.0.1:1/0", "rediss://127.0.0.1:1/0",
    "rediss://127.0.0.1:1/0?ssl_bogus=1", "rediss://127.0.0.1:1/0?ssl_cert_reqs=maybe",
    "redis://127.0.0.1:1/0", "redis://127.0.0.1:99999/0", "redis://127.0.0.1:1/abc",
    "redis://[::1]:1/0", "redis://127.0.0.1:1:2/0", "unix:///nonexistent/redis.sock",
    "unix://", "redis+cluster://127.0.0.1:1", "redis+cluster://127.0.0.1:1,127.0.0.1:2",
    "redis+sentinel://127.0.0.1:1/m/0", "redis+sentinel://127.0.0.1:1", "http://127.0.0.1:1",
    "", "redis://", "127.0.0.1:6379", "redis://127.0.0.1:1/0#frag", 5, None,
])
TEXTS = st.one_of(st.text(max_size=10), st.sampled_from(
    ["tests.redis.fuzz.handlers:record_or_fail", "taskqueue.worker.builtin:sleep", "a:b", "a", ":b",
     "mod.fn", "1a:b", "a:b c", "0.0.0.0", "::1", "127.0.0.1", "999.1.1.1", "localhost",
     "standalone", "cluster", "sentinel", "list", "zset", "hash", "AtLeastOnce", "AtMostOnce",
     "atleastonce"]), NUMBERS)

FIELDS: dict[str, st.SearchStrategy[Json]] = {
    "spec.redis.url": URLS,
    "spec.redis.mode": TEXTS,
    "spec.redis.waitForReplicas": NUMBERS,
    "spec.redis.urlSecretRef": st.sampled_from([{"name": "s", "key": "url"}, {"name": ""},
                                                {}, "s", None]),
    "spec.redis.sentinel": st.sampled_from([
        {"masterName": "m", "addresses": ["127.0.0.1:1"]}, {"masterName": "m", "addresses": []},
        {"masterName": "a b", "addresses": ["h"]}, {"masterName": "m", "addresses": ["h:p"]},
        {"addresses": ["127.0.0.1:1"]}, None, []]),
    "spec.redis.tls": st.sampled_from([{"secretName": "t"}, {"secretName": "t", "certKey": "c"},
                                       {"secretName": ""}, {}, None]),
    "spec.delivery": TEXTS,
    "spec.keyPrefix": KEYS,
    "spec.retry.maxAttempts": NUMBERS,
    "spec.retry.backoffSeconds": NUMBERS,
    "spec.retry.maxBackoffSeconds": NUMBERS,
    "spec.retry.deadLetterKey": KEYS,
    "spec.retry.deadLetterMaxLength": NUMBERS,
    "spec.worker.handler": TEXTS,
    "spec.worker.command": st.sampled_from([["./run.sh"], [], ["a", 5], "run.sh", None]),
    "spec.worker.concurrency": NUMBERS,
    "spec.worker.prefetch": NUMBERS,
    "spec.worker.taskTimeoutSeconds": NUMBERS,
    "spec.worker.heartbeatSeconds": NUMBERS,
    "spec.worker.metricsPort": NUMBERS,
    "spec.worker.metricsAddress": TEXTS,
    "spec.worker.terminationGracePeriodSeconds": NUMBERS,
    "spec.worker.idempotency": st.sampled_from([{}, None, [], {"windowSeconds": 1}]),
    "spec.worker.idempotency.windowSeconds": NUMBERS,
    "spec.worker.nodeSelector": st.sampled_from([{"a": "b"}, {"a": 1}, [], "x"]),
    "spec.worker.env": st.sampled_from([[{"name": "A", "value": "1"}], [1], {}, None]),
    "spec.scaling.minReplicas": NUMBERS,
    "spec.scaling.maxReplicas": NUMBERS,
    "spec.scaling.targetBacklogPerReplica": NUMBERS,
    "spec.scaling.pollIntervalSeconds": NUMBERS,
    "spec.scaling.scaleDownStabilizationSeconds": NUMBERS,
    "spec.scaling.maxScaleUpStep": NUMBERS,
    "spec.scaling.maxScaleDownStep": NUMBERS,
    "spec.scaling.idleCooldownSeconds": NUMBERS,
    "spec.scaling.targetDrainSeconds": NUMBERS,
    "spec.scaling.fallbackReplicas": NUMBERS,
    "spec.scaling.paused": TEXTS,
    "spec.scaling.podStartupSeconds": NUMBERS,
    "spec.scaling.targetWaitSeconds": st.dictionaries(STRING_KEYS, NUMBERS, max_size=2),
    "spec.scaling.expectedServiceSeconds": st.dictionaries(STRING_KEYS, NUMBERS, max_size=2),
    "spec.scaleTargetRef": st.sampled_from([{"name": "d"}, {"name": ""}, {}, "d"]),
    "spec.queues": st.one_of(
        st.lists(st.fixed_dictionaries({"key": KEYS}, optional={
            "type": TEXTS, "starvationLimit": NUMBERS}), max_size=4),
        st.sampled_from([[], {}, "q", None, [{"key": "q"}] * 33])),
    "spec.unknownField": NUMBERS,
    "spec.worker.unknownField": NUMBERS,
    "metadata.name": TEXTS,
    "metadata.namespace": TEXTS,
    "apiVersion": st.sampled_from(["taskqueue.dev/v1alpha1", "taskqueue.dev/v1", "v1", 5]),
    "kind": st.sampled_from(["TaskQueue", "Taskqueue", "Deployment", 5, None]),
    "spec": st.sampled_from([None, [], "spec", 5]),
}
"""Each field a mutation may set, and the values it may set it to."""


def base() -> dict[str, Json]:
    """A valid manifest on the test's Redis."""
    return {"apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue",
            "metadata": {"name": "fuzz", "namespace": "fuzz"},
            "spec": {"redis": {"url": REDIS}, "queues": [{"key": "q"}, {"key": "z",
                                                                       "type": "zset"}],
                     "worker": {"handler": "tests.redis.fuzz.handlers:record_or_fail"}}}


_DELETE = object()


def _set(doc: dict[str, Json], path: str, value: Json) -> None:
    """Set (or delete, for _DELETE) `path` in `doc`, making the mappings on the way."""
    *parents, last = path.split(".")
    node: Any = doc
    for part in parents:
        if not isinstance(node, dict):
            return
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    if not isinstance(node, dict):
        return
    if value is _DELETE:
        node.pop(last, None)
    else:
        node[last] = value


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Json]:
    """A manifest: the valid base with up to four fields set to other values or removed."""
    doc = copy.deepcopy(base())
    for path in draw(st.lists(st.sampled_from(sorted(FIELDS)), max_size=3, unique=True)):
        _set(doc, path, _DELETE if draw(st.integers(0, 7)) == 0 else draw(FIELDS[path]))
    return doc


def _json(doc: Json) -> str:
    return json.dumps(doc, allow_nan=True)


def _yaml(doc: Json) -> str:
    return yaml.safe_dump(doc, allow_unicode=True, sort_keys=False)


def _flow(doc: Json) -> str:
    return yaml.safe_dump(doc, default_flow_style=True, width=10**6)


Odd = Callable[[str], str]
ODDITIES: list[tuple[str, Odd]] = [
    ("none", lambda t: t),
    ("yaml-1.1-boolean", lambda t: t.replace("handler: tests", "paused: no\n  handler: tests")),
    ("dot-inf", lambda t: t.replace("queues:", "retry: {backoffSeconds: .inf}\n  queues:", 1)),
    ("dot-nan", lambda t: t.replace("queues:", "retry: {maxAttempts: .nan}\n  queues:", 1)),
    ("hex-int", lambda t: t.replace("queues:", "retry: {maxAttempts: 0x10}\n  queues:", 1)),
    ("anchor-alias", lambda t: "x: &a {key: q}\n" + t.replace("- key: q", "- *a", 1)),
    ("duplicate-key", lambda t: t + "kind: TaskQueue\n"),
    ("python-tag", lambda t: t.replace("name: fuzz", "name: !!python/object:os.system x", 1)),
    ("tab-indent", lambda t: t.replace("\n  ", "\n\t", 1)),
    ("bom", lambda t: "\ufeff" + t),
    ("two-documents", lambda t: "kind: Other\n---\n" + t),
    ("no-document", lambda t: "---\n"),
    ("list-document", lambda t: "- " + t.replace("\n", "\n  ")),
    ("cut-off", lambda t: t[:len(t) * 2 // 3]),
    ("control-char", lambda t: t.replace("fuzz", "fu\x07zz", 1)),
    ("billion-laughs", lambda t: "a: &a [x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n"
                                 "c: &c [*b, *b, *b, *b, *b, *b, *b, *b]\n" + t),
    ("deep-nesting", lambda t: t.replace("fuzz", "[" * 500 + "]" * 500, 1)),
]


@st.composite
def files(draw: st.DrawFn) -> tuple[dict[str, Json], bytes]:
    """A manifest document and the bytes of a file that holds it (maybe oddly)."""
    doc = draw(documents())
    render = draw(st.sampled_from([_json, _yaml, _flow]))
    text = render(doc)
    _, odd = draw(st.sampled_from(ODDITIES)) if draw(st.booleans()) else ODDITIES[0]
    data = odd(text).encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 15)) == 0:
        data = data.replace(b"fuzz", b"fu\xffzz", 1)
    return doc, data


def with_redis(data: bytes, address: str) -> bytes:
    """The file's bytes with REDIS naming the redis-server at `address` (host:port)."""
    return data.replace(b"@REDIS@", address.encode())
