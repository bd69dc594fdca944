"""Ruleset 2 of the secret detectors (redaction.py): Betterleaks' rules, then Seedline's
own for the forms coding agents print that those rules leave out.

Chosen on one labelled corpus (bench/secret_scanners.py; the table is in the README):
of detect-secrets, its maintained forks, Betterleaks and Kingfisher, Betterleaks found
the most secrets at a false-positive rate a brief can bear, in a few milliseconds a
brief. What it misses is what an agent prints from a shell or a config file rather than
from source code: credentials files (``aws_secret_access_key = …``, ``.netrc``,
``.pgpass``), unquoted YAML and INI values, ``PGPASSWORD=… psql``, command-line
``--password``, ``curl -u`` and ``docker login -p``, URLs of schemes it does not list
(``redis://:pw@``), Azure ``AccountKey=`` and SAS signatures, and long ``sk-proj-`` keys.

Every span is the secret alone: a value's quotes, the ``;`` after it and the word
before it stay. References and templates (``$TOKEN``, ``${DB_PASSWORD}``,
``<your-key>``, ``changeme``) and code (``settings.api_key``, ``os.environ[…]``) are
not secrets.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

from seedline_core.redaction_betterleaks import betterleaks_detector
from seedline_core.redaction_parts import Detector, Finder, Span, group_spans, near, whole

# What a value is not, once its quotes are off: a reference, a template, an elision, a
# stand-in word, or code that computes it.
_NOT_A_VALUE = re.compile(
    r"""^(?:\$|%|<|\{|\[secret left out|\*+$|x+$|\.\.\.|…|-+$|"""
    r"""(?:changeme|change[-_]?me|null|none|nil|true|false|example|password|secret|token|"""
    r"""redacted|hidden|required|optional|str|string|bytes|int)$)""",
    re.IGNORECASE,
)
# A plain word or words (`ollama`, `proxy-handled`): a name put where a key goes, not a key.
_WORDS = re.compile(r"[a-z]+(?:[-_ ][a-z]+)*")
# `settings.api_key`, `os.environ["X"]`, `get_token()`, `self.password`: code, not a value
# (a value with a dot in it, `s3cr3T.x`, is a value).
_CODE = re.compile(r"^[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)+$|[()\[\]]")


def _is_value(value: str) -> bool:
    value = value.strip("\"'`")
    return (len(value) >= 4 and not _NOT_A_VALUE.search(value) and not _CODE.search(value)
            and not _WORDS.fullmatch(value))


def _spans(pattern: re.Pattern[str], kind: str, group: int = 1) -> Finder:
    return group_spans(pattern, kind, group, keep=_is_value)


# Names of the settings that hold secrets, word by word (`aws_secret_access_key`,
# `clientSecret`, `DB-PASSWORD`); a name ending in one of _NOT_SECRET_ENDS holds
# something about a secret, not the secret (`token_url`, `password_file`).
_SECRET_WORDS = frozenset({"password", "passwd", "pwd", "passphrase", "secret", "token",
                           "apikey", "credential", "credentials", "auth"})
_SECRET_PAIRS = frozenset({("api", "key"), ("access", "key"), ("private", "key"),
                           ("secret", "key"), ("account", "key"), ("client", "secret"),
                           ("signing", "key"), ("master", "key"), ("encryption", "key")})
_NOT_SECRET_ENDS = frozenset({"url", "uri", "file", "path", "type", "name", "id", "method",
                              "length", "count", "ttl", "expiry", "expires", "endpoint",
                              "header", "field", "env", "mode", "format", "dir", "prefix",
                              "store", "provider", "providers", "hint", "policy", "required",
                              "enabled", "version", "helper", "manager", "source"})
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def secret_name(name: str) -> bool:
    words = [w.lower() for w in _WORD.findall(name)]
    if not words or words[-1] in _NOT_SECRET_ENDS:
        return False
    return any(w in _SECRET_WORDS for w in words) or any(
        pair in _SECRET_PAIRS for pair in zip(words, words[1:]))


def _named_spans(pattern: re.Pattern[str], kind: str) -> Finder:
    """Matches whose `name` group names a secret: their `value` group is the span."""
    def find(text: str) -> Iterator[Span]:
        for match in pattern.finditer(text):
            name = match.group("name")
            # `@aws-sdk/credential-providers`: a package, not a setting.
            if "/" in name or "@" in name or not secret_name(name):
                continue
            start, end = match.span("value")
            value = text[start:end]
            if "PRIVATE KEY-----" in value:
                continue  # the private key rule takes the block, and only the block
            if value[:1] in "\"'" and len(value) >= 2 and value[-1] == value[0]:
                start, end, value = start + 1, end - 1, value[1:-1]
            if start < end and _is_value(value):
                yield Span(start, end, kind)

    return find


# A private key block, BEGIN to END (or to the end of the text when it was cut); in a
# JSON key file its line breaks are `\n` escapes, and it is found the same way.
_PRIVATE_KEY = re.compile(
    r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY((?: BLOCK)?)-----"
    r".*?(?:-----END \1PRIVATE KEY\2-----|\Z)",
    re.DOTALL,
)
# scheme://user:password@host, the user possibly empty (redis://:pw@host): the password.
_URL_PASSWORD = re.compile(
    r"\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/@'\"<>]{0,128}:([^\s@/'\"<>]{1,256})@"
)
# Tokens whose form alone says what they are, found whole; each pattern runs only on a
# text holding one of its words (lower case), a substring test a hundred times cheaper.
_TOKENS = (
    (re.compile(r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\b"), "aws access key id",
     ("a3t", "akia", "asia", "abia", "acca")),
    (re.compile(r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"), "openai key", ("sk-",)),
    (re.compile(r"\bsk-ant-[a-z]{3}\d{2}-[A-Za-z0-9_-]{20,}"), "anthropic key", ("sk-ant-",)),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}"), "github token", ("github_pat_",)),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}"), "github token",
     ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
)


def _gated(words: tuple[str, ...], find: Finder) -> Detector:
    def detect(text: str, lowered: str) -> Iterator[Span]:
        if any(word in lowered for word in words):
            yield from find(text)

    return detect

_AZURE_ACCOUNT_KEY = re.compile(r"(?i)\bAccountKey=([A-Za-z0-9+/]{20,}={0,2})")
_SAS_SIGNATURE = re.compile(r"[?&]sig=([A-Za-z0-9%+/=]{16,})")
# An HTTP credential header: the scheme word (Bearer, Basic) stays, the credential goes.
_AUTH_HEADER = re.compile(
    r"(?i)\b(?:proxy-)?(?:authorization|x-api-key|api-key|x-auth-token|private-token)"
    r"[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest|bot|apikey)\s+)?"
    r"([^\s\"'\\,;]{4,})"
)
# NAME=value in a shell (`export`, `.env`, `PGPASSWORD=… psql`, `+ X=…` of set -x): the
# value, quoted or up to the first character a shell ends a word at (`;` stays).
_ENV_ASSIGNMENT = re.compile(
    r"(?m)(?:^|(?<=[\s;&|(+]))(?:export[ \t]+)?"
    r"(?:[A-Z0-9]+_)*(?:[A-Z0-9]*(?:PASSWORD|PASSWD|TOKEN|SECRET)|API_?KEY|KEY|PWD|PASS|"
    r"PASSPHRASE|CREDENTIALS?|AUTH)(?:_[A-Z0-9]+)*"
    r"=(\"[^\"\n]*\"|'[^'\n]*'|[^\s#'\"`;&|<>()]+)"
)
# `name: value` and `name = value` on a line of their own (YAML, TOML, INI, a credentials
# file), quoted or not, for a name that says it holds a secret.
_CONFIG_ASSIGNMENT = re.compile(
    r"(?m)^[ \t]*(?:-[ \t]+)?[\"']?(?P<name>[A-Za-z_:][\w.-]{0,80})[\"']?"
    r"(?:[ \t]*=[ \t]*|:[ \t]+)"
    r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s#;,'\"][^\s#;,]*(?=[ \t]*(?:#.*)?$))"
)
# "name": "value" in JSON, for a name that says it holds a secret.
_JSON_FIELD = re.compile(
    r"\"(?P<name>[^\"\n]{1,80})\"\s*:\s*(?P<value>\"(?:[^\"\\\n]|\\.){4,}\")"
)
_CLI_FLAG = re.compile(
    r"(?i)(?<![\w-])--(?:password|passwd|pass|token|api-?key|secret|client-secret|"
    r"auth-token|access-token)(?:=|[ \t]+)(?!-)(\"[^\"\n]*\"|'[^'\n]*'|[^\s'\";&|]+)"
)
_DOCKER_LOGIN = re.compile(r"\bdocker[ \t]+login\b[^\n]*?[ \t]-p[ \t]+(\"[^\"\n]*\"|'[^'\n]*'|\S+)")
_CURL_USER = re.compile(
    r"\bcurl\b[^\n]*?[ \t](?:-u|--user)[ \t]+['\"]?[^:\s'\"]*:([^\s'\"]+)"
)
# .netrc: `password X` on a line of its own or after `login`.
_NETRC = re.compile(
    r"(?m)^[ \t]*(?:machine[ \t]+\S+[ \t]+)?(?:login[ \t]+\S+[ \t]+)?password[ \t]+(\S+)[ \t]*$"
)
# .pgpass: host:port:database:user:password.
_PGPASS = re.compile(r"(?m)^[A-Za-z0-9.*-]+:(?:\d+|\*):[^:\s]+:[^:\s]+:(\S+)$")

_OWN_FIRST: tuple[Detector, ...] = (
    whole(group_spans(_PRIVATE_KEY, "private key", 0)),
    near(re.compile("://"), (_spans(_URL_PASSWORD, "password in a URL"),)),
    *(_gated(words, group_spans(pattern, kind, 0)) for pattern, kind, words in _TOKENS),
    near(re.compile("accountkey="), (_spans(_AZURE_ACCOUNT_KEY, "azure storage key"),)),
    near(re.compile("sig="), (_spans(_SAS_SIGNATURE, "azure sas signature"),)),
)
_OWN_LAST: tuple[Detector, ...] = (
    near(re.compile(r"authorization|api-key|auth-token|private-token"),
         (_spans(_AUTH_HEADER, "authorization header"),)),
    near(re.compile(r"(?:KEY|TOKEN|SECRET|PASS|PWD|PASSPHRASE|CREDENTIALS?|AUTH)[A-Z0-9_]*="),
         (_spans(_ENV_ASSIGNMENT, "assigned secret"),), lowered=False),
    near(re.compile(r"--(?:pass|token|api|secret|client-secret|auth-token|access-token)"),
         (_spans(_CLI_FLAG, "password option"),)),
    near(re.compile(r"docker"), (_spans(_DOCKER_LOGIN, "password option"),)),
    near(re.compile(r"curl"), (_spans(_CURL_USER, "password option"),)),
    near(re.compile(r"password"), (_spans(_NETRC, "netrc password"),)),
    near(re.compile(r":\d+:|:\*:"), (_spans(_PGPASS, "pgpass password"),)),
    near(re.compile(r"pass|pwd|secret|token|key|auth|credential"),
         (_named_spans(_CONFIG_ASSIGNMENT, "assigned secret"),
          _named_spans(_JSON_FIELD, "secret field"))),
)


@lru_cache(maxsize=1)
def detectors() -> tuple[Detector, ...]:
    """Every detector, in the order that names a span two of them find at one place."""
    return (*_OWN_FIRST, betterleaks_detector(_is_value), *_OWN_LAST)
