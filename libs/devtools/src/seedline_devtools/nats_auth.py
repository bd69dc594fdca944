"""Who may say what on NATS: one user for the services, one per runner machine.

A runner machine is the least trusted party in Seedline: it runs engines, and a
launch for it carries a brief of someone's conversation. So each runner gets a
user of its own that can reach nothing but its own part of the runner protocol
(CONTRACT.md section 6):

- subscribe to its own ``seedline.runner.<node>.{launch,turn,stop}`` and to its
  own inbox prefix ``_INBOX_<node>.>`` (nats-py ``inbox_prefix``), where the
  answers to its JetStream publishes and KV calls arrive;
- answer the requests it was sent (``allow_responses``), and nothing else on
  reply subjects;
- publish timeline entries to ``seedline.ingest.timeline`` and its events to
  ``seedline.runner.<node>.events``;
- put, get and delete its own presence key, and look up the bucket's stream
  (``js.key_value`` asks ``$JS.API.STREAM.INFO.KV_seedline_runners``).

Everything else is refused by the server: other runners' subjects and keys, the
timeline and sessions streams, every ``seedline.api.>`` request, every other
JetStream API call. The services share one user with the whole ``seedline.>``
namespace, JetStream and the runners bucket, minus deleting or purging streams
(the timeline is the source of truth; an operator uses the admin user for that).

``authorization_block`` renders the ``authorization { ... }`` part of a
nats-server config; ``deploy_config`` renders deploy/nats-secure.conf, whose
passwords are environment-variable references resolved by nats-server at start.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Mapping

from seedline_contracts import subjects
from seedline_contracts.tokens import escape_token

SERVICES_USER = "seedline-services"
ADMIN_USER = "seedline-admin"
SERVICES_INBOX_PREFIX = "_INBOX"

KV_STREAM = "KV_" + subjects.RUNNERS_BUCKET
KV_SUBJECT_PREFIX = f"$KV.{subjects.RUNNERS_BUCKET}."

# Example machines in deploy/nats-secure.conf; add one block per real machine
# (runner_user renders it), then reload the server (nats-server --signal reload).
EXAMPLE_NODES = ("mac-mini-1", "linux-box-1")


@dataclass(frozen=True)
class Env:
    """A password given as an environment variable that nats-server resolves at start."""

    name: str

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Z_][A-Z0-9_]*", self.name):
            raise ValueError(f"{self.name!r} is not an environment variable name")


Secret = str | Env


@dataclass(frozen=True)
class Permissions:
    publish_allow: tuple[str, ...]
    subscribe_allow: tuple[str, ...]
    publish_deny: tuple[str, ...] = ()
    subscribe_deny: tuple[str, ...] = ()
    allow_responses: bool = False


@dataclass(frozen=True)
class User:
    name: str
    password: Secret
    permissions: Permissions | None = field(default=None)  # None: everything


def runner_user_name(node_id: str) -> str:
    return f"runner-{escape_token(node_id)}"




def presence_subject(node_id: str) -> str:
    return KV_SUBJECT_PREFIX + subjects.presence_key(node_id)


def runner_permissions(node_id: str) -> Permissions:
    """What the runner on ``node_id`` may do, and by omission what it may not."""
    own_key = presence_subject(node_id)
    return Permissions(
        publish_allow=(
            subjects.INGEST_TIMELINE,
            subjects.runner_subject(node_id, "events"),
            own_key,
            f"$JS.API.STREAM.INFO.{KV_STREAM}",
            f"$JS.API.DIRECT.GET.{KV_STREAM}.{own_key}",
        ),
        subscribe_allow=(
            subjects.runner_subject(node_id, "launch"),
            subjects.runner_subject(node_id, "turn"),
            subjects.runner_subject(node_id, "stop"),
            subjects.runner_inbox_prefix(node_id) + ".>",
        ),
        allow_responses=True,
    )


def services_permissions() -> Permissions:
    namespaces = (
        "seedline.>",
        "$JS.API.>",
        "$JS.ACK.>",  # acks and in-progress on pulled messages
        "$JS.FC.>",  # flow control of the gateway's presence watch
        f"{SERVICES_INBOX_PREFIX}.>",
        f"{KV_SUBJECT_PREFIX}>",
    )
    return Permissions(
        publish_allow=namespaces,
        subscribe_allow=namespaces,
        publish_deny=(
            "$JS.API.STREAM.DELETE.>",
            "$JS.API.STREAM.PURGE.>",
            "$JS.API.STREAM.MSG.DELETE.>",
        ),
        # Replies to callers whose inbox is not _INBOX (a runner never asks the
        # services anything, but producers and tools may use their own prefix).
        allow_responses=True,
    )


def _q(value: str) -> str:
    return json.dumps(value)


def _secret(value: Secret) -> str:
    return f"${value.name}" if isinstance(value, Env) else _q(value)


def _subject_list(items: tuple[str, ...]) -> str:
    return "[" + ", ".join(_q(s) for s in items) + "]"


def render_permissions(perms: Permissions, indent: str = "") -> str:
    """A ``permissions { ... }`` block in nats-server config syntax."""
    inner = indent + "  "
    lines = [f"{indent}permissions: {{"]
    for verb, allow, deny in (
        ("publish", perms.publish_allow, perms.publish_deny),
        ("subscribe", perms.subscribe_allow, perms.subscribe_deny),
    ):
        lines.append(f"{inner}{verb}: {{")
        lines.append(f"{inner}  allow: {_subject_list(allow)}")
        if deny:
            lines.append(f"{inner}  deny: {_subject_list(deny)}")
        lines.append(f"{inner}}}")
    if perms.allow_responses:
        lines.append(f"{inner}allow_responses: true")
    lines.append(f"{indent}}}")
    return "\n".join(lines)


def render_user(user: User, indent: str = "    ") -> str:
    head = f"{indent}{{ user: {_q(user.name)}, password: {_secret(user.password)}"
    if user.permissions is None:
        return head + " }"
    return head + "\n" + render_permissions(user.permissions, indent + "  ") + f"\n{indent}}}"


def runner_user(node_id: str, password: Secret) -> User:
    return User(runner_user_name(node_id), password, runner_permissions(node_id))


def services_user(password: Secret) -> User:
    return User(SERVICES_USER, password, services_permissions())


def authorization_block(
    services_password: Secret,
    runners: Mapping[str, Secret],
    admin_password: Secret | None = None,
) -> str:
    """The ``authorization { users = [...] }`` part of a nats-server config.

    ``runners`` maps node ids to passwords. There is no ``no_auth_user``: a
    connection without a known user and password is refused.
    """
    users = [services_user(services_password)]
    users += [runner_user(node, password) for node, password in runners.items()]
    if admin_password is not None:
        users.append(User(ADMIN_USER, admin_password))
    body = "\n".join(render_user(u) for u in users)
    return f"authorization {{\n  users: [\n{body}\n  ]\n}}"


def password_variable(node_id: str) -> Env:
    """SEEDLINE_NATS_RUNNER_<NODE>_PASSWORD, the node id upper-cased with ``_`` for the rest."""
    return Env("SEEDLINE_NATS_RUNNER_" + re.sub(r"[^A-Z0-9]", "_", node_id.upper()) + "_PASSWORD")


def deploy_config(nodes: tuple[str, ...] = EXAMPLE_NODES) -> str:
    """deploy/nats-secure.conf: the durable server of DESIGN.md rule 5, with users."""
    header = (
        "# Seedline nats-server with a user per party. GENERATED by\n"
        "# `python -m seedline_devtools.nats_auth > deploy/nats-secure.conf`; edit nats_auth.py instead.\n"
        "# Passwords come from the environment when the server starts:\n"
        "#   SEEDLINE_NATS_SERVICES_PASSWORD, SEEDLINE_NATS_ADMIN_PASSWORD and one\n"
        "#   SEEDLINE_NATS_RUNNER_<NODE>_PASSWORD per runner machine below.\n"
        "# Services connect as nats://seedline-services:<password>@host:4222; a runner as\n"
        "# runner-<node> with inbox_prefix _INBOX_<node> (see RELIABILITY.md, Security).\n"
        "# Keep the monitoring port (8222) off any network a runner machine is on.\n"
    )
    base = (
        "listen: 0.0.0.0:4222\n"
        "http: 0.0.0.0:8222\n"
        "max_payload: 4MB\n"
        'jetstream {\n  store_dir: "/data"\n  sync_interval: always\n}\n'
    )
    auth = authorization_block(
        Env("SEEDLINE_NATS_SERVICES_PASSWORD"),
        {node: password_variable(node) for node in nodes},
        admin_password=Env("SEEDLINE_NATS_ADMIN_PASSWORD"),
    )
    return header + base + auth + "\n"


if __name__ == "__main__":
    import sys

    sys.stdout.write(deploy_config())
