"""Generate the TaskQueue CustomResourceDefinition from the pydantic models.

``python -m taskqueue.api.crdgen`` writes ``crds/taskqueue.dev_taskqueues.yaml``; ``--check`` exits
1 when the file differs from what the models generate (tests/unit/api/test_crd.py does the same).

The pydantic JSON schema is turned into a structural OpenAPI v3 schema: ``$ref`` inlined,
``anyOf [X, null]`` collapsed to X (optional fields are omitted rather than null; the API server
prunes nulls of non-nullable fields), titles dropped, JSON-Schema 2020 ``exclusiveMinimum`` turned
into the OpenAPI 3.0 form, pass-through Kubernetes objects (env, resources, tolerations...) marked
``x-kubernetes-preserve-unknown-fields``, and the rules pydantic checks in Python expressed as CEL
``x-kubernetes-validations`` so the API server rejects the same manifests. Pure; no I/O but main().
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from taskqueue.api import limits, models, redact, redisspec, schedulespec
from taskqueue.wire import keyspace

OUTPUT = Path("crds") / f"{models.GROUP}_{models.PLURAL}.yaml"

Schema = dict[str, Any]

_TAG = r"'\\{[^}]+\\}'"
_TAGGED = r"'^[^{]*\\{[^}]+\\}'"


def _same_tag(key: str) -> str:
    """CEL: `key` has a hash tag, the same as the first queue key's (models.hash_tag)."""
    return f"({key}.matches({_TAGGED}) && {key}.find({_TAG}) == self.queues[0].key.find({_TAG}))"


_ONE_SLOT = (
    "!((has(self.redis.mode) && self.redis.mode == 'cluster') || (has(self.redis.url) && "
    "self.redis.url.matches('^rediss?[+]cluster://'))) || ("
    f"self.queues.all(q, {_same_tag('q.key')})"
    f" && (!has(self.keyPrefix) || {_same_tag('self.keyPrefix')})"
    " && (!has(self.retry) || !has(self.retry.deadLetterKey) || "
    f"{_same_tag('self.retry.deadLetterKey')}))"
)
"""The hash-tag rule of `models.cluster_key_problem` (which also prints the fix) in CEL."""

_PREFIX = "(has(self.keyPrefix) ? self.keyPrefix : self.queues[0].key)"
_DEAD = ("(has(self.retry) && has(self.retry.deadLetterKey) ? self.retry.deadLetterKey : "
         f"self.queues[0].key + '{keyspace.DEAD_SUFFIX}')")


def _owned(key: str) -> str:
    """CEL: `key` is one of the keys the TaskQueue's prefix derives (`keyspace.owner`)."""
    fixed = ", ".join(f"':{name}'" for name in keyspace.BOOKKEEPING)
    families = ", ".join(f"':{name}:'" for name in keyspace.FAMILIES)
    return (f"([{fixed}].exists(s, {key} == {_PREFIX} + s) || "
            f"[{families}].exists(f, {key}.startsWith({_PREFIX} + f)))")


_OWNED_NAMES = ", ".join(f"<keyPrefix>:{n}" for n in keyspace.BOOKKEEPING) + ", " + ", ".join(
    f"<keyPrefix>:{n}:<id>" for n in keyspace.FAMILIES)


class Rule(NamedTuple):
    """One x-kubernetes-validations entry: the CEL rule, its message, the field it is about and
    a CEL expression for a message that names the value (the message when that fails)."""

    rule: str
    message: str
    field_path: str | None = None
    message_expression: str | None = None


#: CEL rules per model. Mirrors the pydantic validators.
RULES: dict[str, list[Rule]] = {
    "RedisSpec": [Rule(
        "has(self.url) != has(self.urlSecretRef)",
        "set exactly one of spec.redis.url or spec.redis.urlSecretRef "
        "(e.g. url: redis://redis:6379/0)",
    ), Rule(
        f"!has(self.url) || !(self.url.matches('{redact.PASSWORD_IN_USERINFO}') "
        f"|| self.url.matches('{redact.PASSWORD_IN_QUERY}'))",
        models.PASSWORD_IN_URL,
        ".url",
    ), Rule(
        "!has(self.tls) || !has(self.url) || self.url.startsWith('rediss')",
        "spec.redis.tls needs a TLS URL: use rediss:// (rediss+cluster://, rediss+sentinel://)",
        ".tls",
    ), Rule(
        "!has(self.sentinel) || !has(self.mode) || self.mode != 'cluster'",
        "set spec.redis.mode cluster or spec.redis.sentinel, not both (Redis Cluster fails "
        "over by itself)",
        ".sentinel",
    )],
    "RedisTLSSpec": [Rule(
        "has(self.certKey) == has(self.keyKey)",
        "spec.redis.tls: set both certKey and keyKey (a client certificate and its key, e.g. "
        "tls.crt and tls.key) or neither",
    )],
    "WorkerSpec": [Rule(
        "!(has(self.handler) && has(self.command))",
        "set spec.worker.handler or spec.worker.command, not both",
    )],
    "ScalingSpec": [Rule(
        "self.minReplicas <= self.maxReplicas",
        "spec.scaling.minReplicas must be <= spec.scaling.maxReplicas",
        ".minReplicas",
    )],
    "HistorySpec": [Rule(
        f"self.retentionSeconds <= self.intervalSeconds * {float(limits.MAX_HISTORY_ENTRIES)}",
        f"spec.history: retentionSeconds / intervalSeconds is more than "
        f"{limits.MAX_HISTORY_ENTRIES} history points; shorten retentionSeconds or lengthen "
        "intervalSeconds",
        ".retentionSeconds",
    )],
    "TaskQueueSpec": [Rule(
        "self.queues.all(q, self.queues.exists_one(p, p.key == q.key))",
        "spec.queues: each key must be listed once",
        ".queues",
    ), Rule(
        "!has(self.retry) || !has(self.retry.deadLetterKey) || "
        "!self.queues.exists(q, q.key == self.retry.deadLetterKey)",
        "spec.retry.deadLetterKey is also a key in spec.queues: dead-letter records would be "
        "taken as tasks and fail again; use another deadLetterKey",
        ".retry.deadLetterKey",
        "'spec.retry.deadLetterKey ' + self.retry.deadLetterKey + ' is also a key in "
        "spec.queues: dead-letter records would be taken as tasks and fail again; use another "
        "deadLetterKey'",
    ), Rule(
        f"self.queues.all(q, !self.queues.exists(o, q.key == o.key + '{keyspace.DEAD_SUFFIX}'))",
        f"spec.queues: a queue key is another queue's key plus '{keyspace.DEAD_SUFFIX}', the "
        "default dead-letter list of a TaskQueue whose first queue it is; rename the queue",
        ".queues",
    ), Rule(
        f"self.queues.all(q, !{_owned('q.key')})",
        f"spec.queues: a queue key is one of the TaskQueue's own keys ({_OWNED_NAMES}; "
        "keyPrefix defaults to the first queue key); rename the queue or set spec.keyPrefix",
        ".queues",
        f"'spec.queues: a queue key is one of the own keys of the TaskQueue with keyPrefix ' + "
        f"{_PREFIX} + ' ({_OWNED_NAMES}); rename the queue or set spec.keyPrefix'",
    ), Rule(
        f"!{_owned(_DEAD)}",
        f"spec.retry.deadLetterKey (default <first queue key>{keyspace.DEAD_SUFFIX}) is one of "
        f"the TaskQueue's own keys ({_OWNED_NAMES}; keyPrefix defaults to the first queue "
        "key); use another deadLetterKey or set spec.keyPrefix",
        ".retry",
        f"'spec.retry.deadLetterKey ' + {_DEAD} + ' is one of the own keys of the TaskQueue with "
        f"keyPrefix ' + {_PREFIX} + ' ({_OWNED_NAMES}); use another deadLetterKey or set "
        "spec.keyPrefix'",
    ), *(Rule(
        f"!has(self.scaling) || !has(self.scaling.{name}) || "
        f"self.scaling.{name}.all(k, self.queues.exists(q, q.key == k))",
        f"spec.scaling.{name} names a key that is not in spec.queues; use the key of one of "
        "the queues",
        f".scaling.{name}",
    ) for name in ("targetWaitSeconds", "expectedServiceSeconds")), Rule(
        "!has(self.schedules) || self.schedules.all(s, self.schedules.exists_one(o, "
        "o.name == s.name))",
        "spec.schedules: each name must be used once; give each schedule its own name",
        ".schedules",
    ), Rule(
        "!has(self.schedules) || self.schedules.all(s, self.queues.exists(q, q.key == s.queue))",
        "spec.schedules[].queue is not in spec.queues; use the key of one of the queues",
        ".schedules",
    ), Rule(
        _ONE_SLOT,
        "spec.redis.mode cluster: every key of a TaskQueue (spec.queues[*].key, keyPrefix, "
        "retry.deadLetterKey) must share one hash tag so that all of them live in one slot; "
        "e.g. queues {emails}:vip and {emails}:normal (keyPrefix {emails}:jobs)",
        ".queues",
    )],
}

#: Constraints the API server needs beyond pydantic's (patterns for checks done in validators,
#: maxLength so the CEL cost estimate of the rules above stays bounded).
FIELD_EXTRAS: dict[tuple[str, str], Schema] = {
    ("RedisSpec", "url"): {
        "pattern": "^(rediss?(\\+(cluster|sentinel))?|unix)://", "maxLength": 4096},
    ("QueueSpec", "key"): {"maxLength": 512},
    ("ScalingSpec", "targetWaitSeconds"): {"maxProperties": 32},
    ("ScalingSpec", "expectedServiceSeconds"): {"maxProperties": 32},
    ("SentinelSpec", "addresses"): {"items": {"type": "string", "maxLength": 300,
                                              "pattern": redisspec.ADDRESS_PATTERN}},
    ("RetrySpec", "deadLetterKey"): {"maxLength": 512},
    ("TaskQueueSpec", "keyPrefix"): {"maxLength": 512},
    ("ScheduleSpec", "cron"): {"pattern": schedulespec.CRON_FIELDS_PATTERN},
}

PRINTER_COLUMNS = [
    {"name": "Backlog", "type": "integer", "jsonPath": ".status.totalBacklog",
     "description": "Queued tasks in all queues."},
    {"name": "In-flight", "type": "integer", "jsonPath": ".status.inFlight",
     "description": "Tasks held by workers."},
    {"name": "Oldest", "type": "integer", "jsonPath": ".status.oldestTaskAgeSeconds",
     "description": "Seconds the oldest queued task has waited."},
    {"name": "Desired", "type": "integer", "jsonPath": ".status.desiredReplicas",
     "description": "Replicas the operator decided."},
    {"name": "Replicas", "type": "integer", "jsonPath": ".status.replicas",
     "description": "Replicas of the worker Deployment."},
    {"name": "Paused", "type": "string", "jsonPath": ".status.pausedQueues",
     "description": "Queues workers take nothing from."},
    {"name": "Next-Schedule", "type": "date", "jsonPath": ".status.nextScheduleTime",
     "description": "The earliest next slot of spec.schedules."},
    {"name": "Reason", "type": "string", "jsonPath": ".status.reason", "priority": 1,
     "description": "Why the last decision was taken."},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]

#: Keys of a pydantic JSON schema node carried over as they are.
_KEEP = ("type", "description", "pattern", "minimum", "maximum", "minLength", "maxLength",
         "minItems", "maxItems", "enum", "format")


def _resolve(node: Schema, defs: dict[str, Schema]) -> tuple[Schema, str | None]:
    """Inline `$ref` and collapse `anyOf [X, null]`; returns the node and its model name."""
    extra = {k: v for k, v in node.items() if k not in ("$ref", "anyOf")}
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        if len(options) != 1:
            raise ValueError(f"cannot express anyOf {node['anyOf']} structurally")
        inner, name = _resolve(options[0], defs)
        return {**inner, **extra}, name
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return {**defs[name], **extra}, name
    return node, None


def convert(node: Schema, defs: dict[str, Schema], *, object_default: bool = False) -> Schema:
    """One pydantic JSON-schema node as a structural OpenAPI v3 node."""
    node, model = _resolve(node, defs)
    out: Schema = {k: node[k] for k in _KEEP if k in node}
    if "exclusiveMinimum" in node:
        out["minimum"] = node["exclusiveMinimum"]
        out["exclusiveMinimum"] = True
    if node.get("default") is not None and node.get("default") != []:
        out["default"] = node["default"]
    kind = node.get("type")
    if kind == "object":
        _object(node, out, defs, model)
        if object_default and "default" not in out:
            # the defaults of its fields, so CEL rules on it hold for the default itself
            out["default"] = {name: sub["default"] for name, sub in out["properties"].items()
                              if "default" in sub}
    elif kind == "array":
        out["items"] = convert(node["items"], defs)
    if model in RULES:
        out["x-kubernetes-validations"] = [_validation(rule) for rule in RULES[model]]
    return out


def _validation(rule: Rule) -> Schema:
    out: Schema = {"rule": rule.rule, "message": rule.message}
    if rule.message_expression:
        out["messageExpression"] = rule.message_expression
    if rule.field_path:
        out["fieldPath"] = rule.field_path
    return out


def _object(node: Schema, out: Schema, defs: dict[str, Schema], model: str | None) -> None:
    properties: dict[str, Schema] = node.get("properties", {})
    if properties:
        required = set(node.get("required", ()))
        out["properties"] = {
            name: {
                **convert(sub, defs, object_default=name not in required and "default" not in sub
                          and _is_model(sub, defs)),
                **FIELD_EXTRAS.get((model or "", name), {}),
            }
            for name, sub in properties.items()
        }
        if node.get("required"):
            out["required"] = list(node["required"])
        return
    extra = node.get("additionalProperties", True)
    if extra is True or extra == {}:
        out["x-kubernetes-preserve-unknown-fields"] = True
    else:
        out["additionalProperties"] = convert(extra, defs)


def _is_model(node: Schema, defs: dict[str, Schema]) -> bool:
    _, name = _resolve(node, defs)
    return name is not None


def openapi_schema() -> Schema:
    """The structural schema of a whole TaskQueue object."""
    full = models.TaskQueue.model_json_schema()
    defs: dict[str, Schema] = full["$defs"]
    spec = convert({"$ref": "#/$defs/TaskQueueSpec"}, defs)
    spec["description"] = "Desired state: the queues, the workers and how they scale."
    status = convert({"$ref": "#/$defs/TaskQueueStatus"}, defs)
    status["description"] = "Observed state, written by the operator."
    conditions = status["properties"]["conditions"]
    conditions["x-kubernetes-list-type"] = "map"
    conditions["x-kubernetes-list-map-keys"] = ["type"]
    return {
        "type": "object",
        "description": "A set of Redis queues and the autoscaled workers that consume them.",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
    }


def crd() -> Schema:
    """The CustomResourceDefinition manifest."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{models.PLURAL}.{models.GROUP}",
            "labels": {"app.kubernetes.io/name": "taskqueue-operator"},
        },
        "spec": {
            "group": models.GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": models.KIND,
                "listKind": f"{models.KIND}List",
                "plural": models.PLURAL,
                "singular": models.SINGULAR,
                "shortNames": list(models.SHORT_NAMES),
                "categories": ["all"],
            },
            "versions": [{
                "name": models.VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": PRINTER_COLUMNS,
                "schema": {"openAPIV3Schema": openapi_schema()},
            }],
        },
    }


def render() -> str:
    """The CRD as the YAML text stored in crds/."""
    header = ("# Generated by `python -m taskqueue.api.crdgen` from taskqueue/api/models.py. "
              "Do not edit.\n")
    return header + yaml.safe_dump(crd(), sort_keys=False, width=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m taskqueue.api.crdgen", description=__doc__)
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text("utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is stale: run python -m taskqueue.api.crdgen", file=sys.stderr)
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, "utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
