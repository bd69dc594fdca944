"""Source files generated from the code, kept in the repository and held to it by tests:
the NATS server configurations with every process's permissions and the client's
directory of which process answers each API (both from the routing tables), and the
Postgres roles with every service's grants.

    python -m seedline_devtools.generated   # (make schema) rewrites them in this checkout
"""

from __future__ import annotations

import sys
from pathlib import Path

from . import nats_auth, pg_roles
from .tables import answered_by

DIRECTORY = "libs/client/src/seedline_client/directory.py"


def directory_module() -> str:
    rows = "".join(f"    {subject!r}: {service!r},\n"
                   for subject, service in sorted(answered_by().items()))
    return (
        '"""Which process answers each request/reply API, so an error can say which part of\n'
        "Seedline is not running. GENERATED from the routing tables by `make schema`\n"
        '(seedline_devtools.generated); do not edit."""\n\n'
        f"ANSWERED_BY: dict[str, str] = {{\n{rows}}}\n"
    )


def generated_sources() -> dict[str, str]:
    """Path from the repository's root -> exact text."""
    return {
        "deploy/nats-secure.conf": nats_auth.deploy_config(),
        "deploy/nats-users.conf": nats_auth.users_file(
            {node: nats_auth.password_variable(node) for node in nats_auth.EXAMPLE_NODES}),
        "deploy/nats-tls.conf": nats_auth.tls_deploy_config(),
        "deploy/postgres-roles.sql": pg_roles.roles_sql(),
        DIRECTORY: directory_module(),
    }


def main(root: Path) -> None:
    for relative, text in generated_sources().items():
        (root / relative).write_text(text, encoding="utf-8")
        sys.stdout.write(f"wrote {relative}\n")


if __name__ == "__main__":
    main(Path.cwd())
