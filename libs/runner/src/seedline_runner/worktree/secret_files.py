"""Files that are secrets by what they are (environment files, private keys, credential
files): a saved tree leaves them out and lists them, and never stores them."""

from __future__ import annotations

import fnmatch
from pathlib import PurePosixPath

# (pattern on the file's name, why). An example or template of one is not a secret.
_BY_NAME = (
    (".env", "an environment file"),
    (".env.*", "an environment file"),
    ("*.env", "an environment file"),
    ("id_rsa", "a private key"),
    ("id_dsa", "a private key"),
    ("id_ecdsa", "a private key"),
    ("id_ed25519", "a private key"),
    ("*.pem", "a key or certificate file"),
    ("*.key", "a private key"),
    ("*.p12", "a key store"),
    ("*.pfx", "a key store"),
    ("*.jks", "a key store"),
    ("*.keystore", "a key store"),
    ("*.kdbx", "a password database"),
    (".npmrc", "a credentials file"),
    (".pypirc", "a credentials file"),
    (".netrc", "a credentials file"),
    (".git-credentials", "a credentials file"),
    (".htpasswd", "a credentials file"),
    ("credentials", "a credentials file"),
    ("credentials.json", "a credentials file"),
    ("*.tfvars", "a credentials file"),
    ("*service-account*.json", "a cloud key file"),
    ("secrets.y*ml", "a secrets file"),
)
_NOT_SECRET = (".example", ".sample", ".template", ".dist")
_KEY_HEADER = b"-----BEGIN "
_KEY_MARK = b"PRIVATE KEY"
SNIFF_BYTES = 65_536


def secret_file(path: str, head: bytes = b"") -> str | None:
    """Why the file at `path` (with its first bytes `head`) is a secret file, or None."""
    name = PurePosixPath(path).name
    lowered = name.lower()
    if not lowered.endswith(_NOT_SECRET):
        for pattern, why in _BY_NAME:
            if fnmatch.fnmatchcase(lowered, pattern):
                return why
    if _KEY_HEADER in head and _KEY_MARK in head:
        return "a private key"
    return None
