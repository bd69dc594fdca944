"""Secrets left out of text that leaves the instance (CONTRACT.md 5). Pure: no I/O.

An agent's terminal output holds secrets (an `.env` printed, a token in a URL, a
private key), and a brief carries that history to another machine and often to
another vendor's model. Every span a detector recognises becomes
``[secret left out: <kind>]``; the rest of the text is kept byte for byte.

The detectors are Yelp's detect-secrets plugins (its maintained token patterns and its
keyword rules), named one by one so that an upgrade adding a plugin never changes a
replayed brief, plus what they miss and coding agents print often: passwords in
connection strings, ``Authorization:`` headers, whole private key blocks (the plugin
finds only the BEGIN line) and ``.env`` assignments of key-like names. Hex strings
alone (git shas, digests) and UUIDs are never a secret here unless they stand where a
secret does: a brief that lost the commit it needed would be wrong in another way.

``RULESET`` names this set; a brief records it, and a replay of a brief recorded
without one redacts nothing, as it was composed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache

RULESET = 1
MARKER_PREFIX = "[secret left out: "
_MARKER = re.compile(re.escape(MARKER_PREFIX) + r"[A-Za-z0-9 .'-]{1,60}\]")


def marker(kind: str) -> str:
    return f"{MARKER_PREFIX}{kind}]"


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    kind: str


@dataclass(frozen=True)
class Redacted:
    text: str
    # Where each marker stands in `text`, in order: a cut can then keep or drop a marker
    # whole and count only those it keeps.
    markers: tuple[tuple[int, int], ...]

    @property
    def count(self) -> int:
        return len(self.markers)


_PLACEHOLDER = re.compile(
    r"""^(?:\$|%|<|\{|\[secret left out|\*+$|x+$|\.\.\.|…|changeme$|null$|none$|true$|false$)""",
    re.IGNORECASE,
)


def _placeholder(value: str) -> bool:
    """A reference to a secret, a template or an elision is not a secret."""
    value = value.strip("\"'`")
    return len(value) < 4 or _PLACEHOLDER.search(value) is not None


# A private key block, BEGIN to END (or to the end of the text when it was cut).
_PRIVATE_KEY = re.compile(
    r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY((?: BLOCK)?)-----"
    r".*?(?:-----END \1PRIVATE KEY\2-----|\Z)",
    re.DOTALL,
)
# scheme://user:password@host: only the password goes.
_URL_PASSWORD = re.compile(
    r"\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/@'\"<>]{1,128}:([^\s@/'\"<>]{1,256})@"
)
# An HTTP credential header, in a request printed, a curl -H or a config: the scheme
# word (Bearer, Basic) stays, the credential goes.
_AUTH_HEADER = re.compile(
    r"(?i)\b(?:proxy-)?(?:authorization|x-api-key|api-key|x-auth-token|private-token)"
    r"[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest|bot|apikey)\s+)?"
    r"([^\s\"'\\,;]{4,})"
)
# NAME=value where NAME is an environment-style name with a key-like word in it.
_ENV_ASSIGNMENT = re.compile(
    r"(?m)(?:^|(?<=[\s;&|(]))(?:export[ \t]+)?"
    r"(?:[A-Z0-9]+_)*(?:API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|PWD|PASS|PASSPHRASE|"
    r"CREDENTIALS?|AUTH)(?:_[A-Z0-9]+)*"
    r"=(\"[^\"\n]*\"|'[^'\n]*'|[^\s#'\"]+)"
)


# A detector gets the text and its lower-case copy (same length): searching key words in
# the copy without IGNORECASE is ten times faster than with it.
Detector = Callable[[str, str], Iterator[Span]]
# Around a key word, how far a keyword rule looks for its value (detect-secrets reads
# one line; a line can be a whole minified file).
_AROUND = 300


def _group_spans(
    pattern: re.Pattern[str], kind: str, group: int
) -> Callable[[str], Iterator[Span]]:
    def find(text: str) -> Iterator[Span]:
        for match in pattern.finditer(text):
            start, end = match.span(group)
            value = text[start:end]
            if value[:1] in "\"'" and len(value) >= 2 and value[-1] == value[0]:
                start, end, value = start + 1, end - 1, value[1:-1]
            if start < end and (group == 0 or not _placeholder(value)):
                yield Span(start, end, kind)

    return find


def _whole(find: Callable[[str], Iterator[Span]]) -> Detector:
    return lambda text, lowered: find(text)


def _near(
    trigger: re.Pattern[str], finders: tuple[Callable[[str], Iterator[Span]], ...],
    lowered: bool = True,
) -> Detector:
    """`finders` run only on the part of a line around each place `trigger` finds (in the
    lower-case copy when `lowered`). Every secret these rules find stands on one line
    next to its key word, and the full patterns cost a hundred times more per character
    than the search for the key words."""

    def near(text: str, lower: str) -> Iterator[Span]:
        windows: list[list[int]] = []
        for hit in trigger.finditer(lower if lowered else text):
            line_start = text.rfind("\n", 0, hit.start()) + 1
            line_end = text.find("\n", hit.end())
            line_end = len(text) if line_end < 0 else line_end
            start = max(line_start, hit.start() - _AROUND)
            end = min(line_end, hit.end() + _AROUND)
            if windows and start <= windows[-1][1] and line_start <= windows[-1][0]:
                windows[-1][1] = max(windows[-1][1], end)
            else:
                windows.append([start, end])
        for start, end in windows:
            part = text[start:end]
            for find in finders:
                for span in find(part):
                    yield Span(start + span.start, start + span.end, span.kind)

    return near


_OWN_FIRST = (
    _whole(_group_spans(_PRIVATE_KEY, "private key", 0)),
    _near(re.compile("://"), (_group_spans(_URL_PASSWORD, "password in a URL", 1),)),
)
_OWN_LAST = (
    _near(
        re.compile(r"authorization|api-key|auth-token|private-token"),
        (_group_spans(_AUTH_HEADER, "authorization header", 1),),
    ),
    _near(
        re.compile(r"(?:KEY|TOKEN|SECRET|PASS|PWD|PASSPHRASE|CREDENTIALS?|AUTH)[A-Z0-9_]*="),
        (_group_spans(_ENV_ASSIGNMENT, "assigned secret", 1),),
        lowered=False,
    ),
)


@lru_cache(maxsize=1)
def _detectors() -> tuple[Detector, ...]:
    """Every detector, in the order that names a span two of them find at one place.
    detect-secrets' plugins are imported on first use (they pull in requests)."""
    from detect_secrets.plugins import (
        artifactory, aws, azure_storage_key, basic_auth, discord, github_token,
        gitlab_token, jwt, mailchimp, npm, openai, private_key, pypi_token, sendgrid,
        slack, square_oauth, stripe, telegram_token, twilio,
    )
    from detect_secrets.plugins.keyword import (
        DENYLIST,
        QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP,
    )

    plugins = (
        aws.AWSKeyDetector(), artifactory.ArtifactoryDetector(),
        azure_storage_key.AzureStorageKeyDetector(), basic_auth.BasicAuthDetector(),
        discord.DiscordBotTokenDetector(), github_token.GitHubTokenDetector(),
        gitlab_token.GitLabTokenDetector(), jwt.JwtTokenDetector(),
        mailchimp.MailchimpDetector(), npm.NpmDetector(), openai.OpenAIDetector(),
        private_key.PrivateKeyDetector(), pypi_token.PypiTokenDetector(),
        sendgrid.SendGridDetector(), slack.SlackDetector(), square_oauth.SquareOAuthDetector(),
        stripe.StripeDetector(), telegram_token.TelegramBotTokenDetector(),
        twilio.TwilioKeyDetector(),
    )
    # The keyword rules (`password = "..."`, `"api_key": "..."`): quotes required, as
    # detect-secrets does for text whose file type it cannot tell.
    keyword = _near(re.compile("|".join(DENYLIST)), tuple(
        _group_spans(pattern, "secret keyword", group)
        for pattern, group in QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP.items()
    ))
    return (*_OWN_FIRST, *(_plugin_spans(p) for p in plugins), *_OWN_LAST, keyword)


def load_detectors() -> None:
    """Import and build the detectors now rather than on the first text redacted."""
    _detectors()


def _plugin_spans(plugin: object) -> Detector:
    """A regex plugin's matches, each confirmed by the plugin itself (its own checks: a
    JSON Web Token must decode). Where the pattern captures the value (the password of
    `://user:password@`), that is the span; a group that captures only a token's prefix
    (`ghp` of `ghp_...`) is not, and the whole match is, less what the pattern matches
    around a token (Artifactory's leading space or quote)."""
    kind = plugin.secret_type.lower()  # type: ignore[attr-defined]
    patterns = tuple(plugin.denylist)  # type: ignore[attr-defined]
    analyze = plugin.analyze_string  # type: ignore[attr-defined]
    gate = _GATES.get(type(plugin).__name__)

    def find(text: str, lowered: str) -> Iterator[Span]:
        if gate is not None and not any(
            word in (lowered if word.islower() else text) for word in gate
        ):
            return
        for pattern in patterns:
            for match in pattern.finditer(text):
                reported = {value for value in analyze(match.group(0)) if value}
                if not reported:
                    continue
                start, end = _value_span(match, reported)
                if start < end and not _placeholder(text[start:end]):
                    yield Span(start, end, kind)

    return find


# Words without one of which a plugin's patterns cannot match (lower case: looked for in
# the lower-case copy): a substring test costs about a nanosecond a character, the
# patterns up to forty.
_GATES = {
    "AWSKeyDetector": ("a3t", "abia", "acca", "akia", "asia", "aws"),
    "ArtifactoryDetector": ("AKC", "AP"),
    "AzureStorageKeyDetector": ("accountkey=",),
    "BasicAuthDetector": ("://",),
    "GitHubTokenDetector": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    "GitLabTokenDetector": ("gl", "gr1348941"),
    "JwtTokenDetector": ("eyj",),
    "MailchimpDetector": ("-us",),
    "NpmDetector": ("_authtoken",),
    "OpenAIDetector": ("t3blbkfj",),
    "PrivateKeyDetector": ("private key", "putty"),
    "PypiTokenDetector": ("pypi-",),
    "SendGridDetector": ("sg.",),
    "SlackDetector": ("xox", "hooks.slack.com"),
    "SquareOAuthDetector": ("sq0csp-",),
    "StripeDetector": ("k_live_",),
    "TwilioKeyDetector": ("AC", "SK"),
}


def _value_span(match: re.Match[str], reported: set[str]) -> tuple[int, int]:
    for group in range(1, (match.re.groups or 0) + 1):
        start, end = match.span(group)
        if start < 0 or match.group(group) not in reported:
            continue
        if not (start == match.start() and end < match.end()):
            return start, end
    matched = match.group(0)
    lead = len(matched) - len(matched.lstrip(_EDGES))
    trail = len(matched) - len(matched.rstrip(_EDGES))
    return match.start() + lead, match.end() - trail


# What a plugin's pattern may match around a token (Artifactory's `(?:\s|=|:|"|^)`).
_EDGES = " \t\r\n=:\"'"


def _lower(text: str) -> str:
    """A lower-case copy with the same offsets (str.lower lengthens a few characters)."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def find_secrets(text: str) -> list[Span]:
    """The secret spans of `text`, in order, overlapping ones merged (of two starting
    together, the more specific detector names the span: a whole private key block and a
    URL's password first, then the scanner's named tokens, then the generic rules). A
    marker already in the text is never redacted again."""
    if not text:
        return []
    kept = [m.span() for m in _MARKER.finditer(text)]
    found: list[tuple[int, int, int, str]] = []
    lowered = _lower(text)
    for order, detect in enumerate(_detectors()):
        for span in detect(text, lowered):
            if not any(span.start < end and start < span.end for start, end in kept):
                found.append((span.start, order, span.end, span.kind))
    merged: list[Span] = []
    for start, _, end, kind in sorted(found):
        if merged and start < merged[-1].end:
            last = merged[-1]
            merged[-1] = Span(last.start, max(last.end, end), last.kind)
        else:
            merged.append(Span(start, end, kind))
    return merged


def redact(text: str) -> Redacted:
    """`text` with every secret span replaced by its marker."""
    spans = find_secrets(text)
    if not spans:
        return Redacted(text, ())
    parts: list[str] = []
    markers: list[tuple[int, int]] = []
    at = 0
    length = 0
    for span in spans:
        parts.append(text[at:span.start])
        length += span.start - at
        shown = marker(span.kind)
        parts.append(shown)
        markers.append((length, length + len(shown)))
        length += len(shown)
        at = span.end
    parts.append(text[at:])
    return Redacted("".join(parts), tuple(markers))
