"""Ruleset 1 of the secret detectors (redaction.py): what briefs composed with it were
redacted by, kept as it was so that they replay byte for byte.

Yelp's detect-secrets plugins (its token patterns and its keyword rules), named one by
one so that an upgrade adding a plugin never changes a replayed brief, plus what they
miss and coding agents print often: passwords in connection strings, ``Authorization:``
headers, whole private key blocks (the plugin finds only the BEGIN line) and ``.env``
assignments of key-like names. Hex strings alone (git shas, digests) and UUIDs are never
a secret here unless they stand where a secret does.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

from seedline_core.redaction_parts import (
    Detector,
    Span,
    group_spans as _group_spans,
    near as _near,
    placeholder as _placeholder,
    whole as _whole,
)

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
def detectors() -> tuple[Detector, ...]:
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
    return (*_OWN_FIRST, *(plugin_spans(p) for p in plugins), *_OWN_LAST, keyword)


def plugin_spans(plugin: object) -> Detector:
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
