"""Who may say what on NATS: a user per service, one per runner machine, an admin.

A runner machine is the least trusted party in Seedline: it runs engines, and a
launch for it carries a brief of someone's conversation. So each runner gets a
user of its own that can reach nothing but its own part of the runner protocol
(CONTRACT.md section 6):

- subscribe to its own ``seedline.runner.<node>.{launch,turn,stop}`` and to its
  own inbox prefix ``_INBOX_<node>.>`` (nats-py ``inbox_prefix``), where the
  answers to its JetStream publishes and KV calls arrive;
- answer the requests it was sent (``allow_responses``), and nothing else on
  reply subjects;
- publish its engines' output to ``seedline.ingest.runner.<node>`` (the only ingest
  subject it may use) and its events to ``seedline.runner.<node>.events``;
- put, get and delete its own presence key, and look up the bucket's stream.

Each service (and the web process) has a user of its own too (DESIGN.md, least
privilege), generated from its routing table: it publishes only what its rows may send
(only the timeline-writer writes the timeline; each session event type has its writers),
subscribes only to the APIs it answers and the messages it listens to, and receives on
its own inbox prefix ``_INBOX_<service>``. All of them may use the JetStream API except
deleting or purging streams and messages (the timeline is the source of truth; an
operator uses the admin user for that).

``authorization_block`` renders the ``authorization { ... }`` part of a nats-server
config; ``deploy_config`` renders deploy/nats-secure.conf, which includes the users from
deploy/nats-users.conf (``users_file``), whose passwords are environment-variable references
resolved by nats-server at start, or bcrypt hashes for the machines.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Mapping

from seedline_contracts import channels, subjects
from seedline_contracts.streams import ALL_STREAMS
from seedline_contracts.tokens import escape_token
from seedline_platform.erasure import FORGOTTEN_BUCKET
from seedline_platform.routing import Kind
from seedline_platform.sealing import KEYS_BUCKET

from .tables import routing_tables

ADMIN_USER = "seedline-admin"

KV_STREAM = "KV_" + subjects.RUNNERS_BUCKET
KV_SUBJECT_PREFIX = f"$KV.{subjects.RUNNERS_BUCKET}."

# Example machines in deploy/nats-users.conf; `seedline machines add` writes real ones.
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


OBJ_STREAM = f"OBJ_{subjects.WORKTREES_BUCKET}"


def presence_subject(node_id: str) -> str:
    return KV_SUBJECT_PREFIX + subjects.presence_key(node_id)


def runner_permissions(node_id: str) -> Permissions:
    """What the runner on ``node_id`` may do, and by omission what it may not."""
    own_key = presence_subject(node_id)
    return Permissions(
        publish_allow=(
            subjects.ingest_runner_subject(node_id),
            subjects.ingest_runner_subject(node_id) + ".*",  # ... with the entry's instance
            subjects.runner_subject(node_id, "events"),
            own_key,
            f"$JS.API.STREAM.INFO.{KV_STREAM}",
            f"$JS.API.DIRECT.GET.{KV_STREAM}.{own_key}",
            # Its conversations' saved checkouts (CONTRACT.md 6): it stores them as they
            # stop and reads what a launch carries. Each is sealed with its conversation's
            # key, which only the launch of that conversation gives a machine.
            f"$O.{subjects.WORKTREES_BUCKET}.>",
            f"$JS.API.STREAM.INFO.{OBJ_STREAM}",
            "$JS.API.STREAM.NAMES",  # a read of an object finds its stream by subject
            f"$JS.API.STREAM.MSG.GET.{OBJ_STREAM}",
            f"$JS.API.DIRECT.GET.{OBJ_STREAM}.>",
            f"$JS.API.CONSUMER.CREATE.{OBJ_STREAM}",
            f"$JS.API.CONSUMER.CREATE.{OBJ_STREAM}.>",
            f"$JS.API.CONSUMER.DELETE.{OBJ_STREAM}.>",
            f"$JS.API.CONSUMER.MSG.NEXT.{OBJ_STREAM}.>",
        ),
        subscribe_allow=(
            subjects.runner_subject(node_id, "launch"),
            subjects.runner_subject(node_id, "turn"),
            subjects.runner_subject(node_id, "stop"),
            subjects.runner_inbox_prefix(node_id) + ".>",
        ),
        allow_responses=True,
    )


def service_subjects(service: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What a process publishes and subscribes to beyond the JetStream API and its inbox,
    generated from its routing table: every subject a row may send (its parking place
    included), and every subject a row answers or listens to on core NATS (a JetStream
    consumer delivers to the process's inbox)."""
    table = routing_tables()[service]
    publishes = dict.fromkeys(f for route in table for f in route.send_filters)
    subscribes = dict.fromkeys(
        f for route in table if route.kind in (Kind.REQUEST, Kind.MESSAGE, Kind.BROADCAST)
        for f in route.filters)
    return tuple(publishes), tuple(subscribes)


def services() -> tuple[str, ...]:
    """Every process with a user of its own: each one with a routing table."""
    return tuple(routing_tables())


JETSTREAM_DENIED = (
    "$JS.API.STREAM.DELETE.>",
    "$JS.API.STREAM.PURGE.>",
    "$JS.API.STREAM.MSG.DELETE.>",
    "$JS.API.STREAM.UPDATE.>",
)
# Forgetting an instance removes its messages from the streams that hold plain text
# (seedline_platform.erasure.scrub_streams): the timeline-writer, which answers the
# operator's forget, may purge notices and delete single ingest, rejected and notice
# messages; every other stream, and deleting or changing a stream, stays refused.
_FORGET_PURGES = (subjects.NOTICES_STREAM,)
_FORGET_DELETES = (subjects.INGEST_STREAM, subjects.REJECTED_STREAM, subjects.NOTICES_STREAM)
_PROTECTED_STREAMS = (
    *(spec.name for spec in ALL_STREAMS),
    *(f"KV_{bucket}" for bucket in (subjects.RUNNERS_BUCKET, KEYS_BUCKET, FORGOTTEN_BUCKET)),
)



def jetstream_denied(service: str, publishes: tuple[str, ...]) -> tuple[str, ...]:
    """What a service may not do with the JetStream API: delete or change a stream, or
    purge one or delete from one, but where its work needs it: the timeline-writer's
    forget (above), and deleting saved checkouts (the object store's chunks are purged by
    subject) for the rows that send to it (CONTRACT.md 6)."""
    purges, deletes = set(), set()
    if service == "timeline-writer":
        purges, deletes = set(_FORGET_PURGES), set(_FORGET_DELETES)
    if channels.WORKTREES.address in publishes:
        purges.add(OBJ_STREAM)
    if not purges and not deletes:
        return JETSTREAM_DENIED
    protected = (*_PROTECTED_STREAMS, OBJ_STREAM)
    return ("$JS.API.STREAM.DELETE.>", "$JS.API.STREAM.UPDATE.>",
            *(f"$JS.API.STREAM.PURGE.{name}" for name in protected if name not in purges),
            *(f"$JS.API.STREAM.MSG.DELETE.{name}" for name in protected if name not in deletes))


def service_user_name(service: str) -> str:
    return f"seedline-{service}" if not service.startswith("seedline-") else service


def service_permissions(service: str) -> Permissions:
    """What `service` may do on NATS, and by omission what it may not."""
    publishes, subscribes = service_subjects(service)
    inbox = subjects.service_inbox_prefix(service) + ".>"
    jetstream = ("$JS.API.>", "$JS.ACK.>", "$JS.FC.>")
    return Permissions(
        publish_allow=(*publishes, *jetstream),
        subscribe_allow=(*subscribes, inbox, "$SRV.>"),
        # Forgetting an instance and removing a machine are the operator's requests alone,
        # whatever else may be asked.
        publish_deny=(*jetstream_denied(service, publishes), subjects.API_INSTANCES_FORGET,
                      subjects.API_MACHINES_REMOVE),
        # Answers to its requests, to $SRV discovery and to callers with any inbox.
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


def service_user(service: str, password: Secret) -> User:
    return User(service_user_name(service), password, service_permissions(service))


def users_block(
    services: Mapping[str, Secret],
    runners: Mapping[str, Secret],
    admin_password: Secret | None = None,
) -> str:
    """The ``users: [...]`` of an ``authorization`` block.

    ``services`` maps service names to passwords, ``runners`` node ids to passwords (or
    their bcrypt hashes, which nats-server takes for a password).
    """
    users = [service_user(service, password) for service, password in services.items()]
    users += [runner_user(node, password) for node, password in runners.items()]
    if admin_password is not None:
        users.append(User(ADMIN_USER, admin_password))
    body = "\n".join(render_user(u) for u in users)
    return f"users: [\n{body}\n]"


def authorization_block(
    services: Mapping[str, Secret],
    runners: Mapping[str, Secret],
    admin_password: Secret | None = None,
) -> str:
    """The ``authorization { users = [...] }`` part of a nats-server config.

    There is no ``no_auth_user``: a connection without a known user and password is
    refused.
    """
    inner = users_block(services, runners, admin_password).replace("\n", "\n  ")
    return f"authorization {{\n  {inner}\n}}"


USERS_FILE = "nats-users.conf"


def users_file(runners: Mapping[str, Secret]) -> str:
    """The users nats-server knows, in a file of their own that deploy/nats-secure.conf
    includes: a user per service and the admin (passwords from the environment) and one per
    runner machine. `seedline machines add` and `remove` write it anew and make the server
    reload it (seedline_devtools.machines)."""
    header = (
        "# The NATS users of Seedline, included by nats-secure.conf. GENERATED: the services'\n"
        "# from the routing tables (`make schema`), the machines' by `seedline machines add`\n"
        "# and `remove`, which write this file anew and reload nats-server.\n"
    )
    block = users_block(
        {service: service_password_variable(service) for service in services()},
        runners, admin_password=Env("SEEDLINE_NATS_ADMIN_PASSWORD"))
    return header + block + "\n"


def _variable(kind: str, name: str) -> Env:
    return Env(f"SEEDLINE_NATS_{kind}" + re.sub(r"[^A-Z0-9]", "_", name.upper()) + "_PASSWORD")


def password_variable(node_id: str) -> Env:
    """SEEDLINE_NATS_RUNNER_<NODE>_PASSWORD, the node id upper-cased with ``_`` for the rest."""
    return _variable("RUNNER_", node_id)


def service_password_variable(service: str) -> Env:
    """SEEDLINE_NATS_<SERVICE>_PASSWORD, e.g. SEEDLINE_NATS_TIMELINE_WRITER_PASSWORD."""
    return _variable("", service.removeprefix("seedline-"))


def deploy_config() -> str:
    """deploy/nats-secure.conf: the durable server of DESIGN.md rule 5, with users."""
    header = (
        "# Seedline nats-server with a user per party. GENERATED from the routing tables by\n"
        "# `make schema` (seedline_devtools.generated); edit the tables or nats_auth.py instead.\n"
        f"# The users are in {USERS_FILE} beside this file, which `seedline machines add` and\n"
        "# `remove` write anew (then signal a reload: no restart). Passwords come from the\n"
        "# environment when the server starts: one SEEDLINE_NATS_<SERVICE>_PASSWORD per\n"
        "# service and SEEDLINE_NATS_ADMIN_PASSWORD; a machine's is stored as a bcrypt hash.\n"
        "# A service connects as nats://seedline-<service>:<password>@host:4222 (it uses the\n"
        "# inbox prefix _INBOX_<service> itself); a runner as runner-<node> with inbox_prefix\n"
        "# _INBOX_<node> (see RELIABILITY.md, Security).\n"
        "# Keep the monitoring port (8222) off any network a runner machine is on.\n"
    )
    base = (
        "listen: 0.0.0.0:4222\n"
        "http: 0.0.0.0:8222\n"
        "max_payload: 4MB\n"
        'pid_file: "/data/nats-server.pid"\n'
        'jetstream {\n  store_dir: "/data"\n  sync_interval: always\n}\n'
    )
    return header + base + f'authorization {{\n  include "{USERS_FILE}"\n}}\n'


TLS_BLOCK = """tls {
  cert_file: $SEEDLINE_NATS_TLS_CERT
  key_file: $SEEDLINE_NATS_TLS_KEY
  timeout: 2
}
"""


def tls_deploy_config() -> str:
    """deploy/nats-tls.conf: deploy/nats-secure.conf with every client connection on TLS."""
    note = (
        "# The same server with TLS on every client connection. GENERATED by `make schema`\n"
        "# (seedline_devtools.generated).\n"
        "# SEEDLINE_NATS_TLS_CERT and SEEDLINE_NATS_TLS_KEY name the server's certificate and key\n"
        "# (PEM). Clients connect to tls://host:4222; services trust the CA in\n"
        "# SEEDLINE_NATS_CA_FILE.\n"
    )
    return note + deploy_config() + TLS_BLOCK

