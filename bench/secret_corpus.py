"""A labelled corpus for choosing a secret scanner: fake secrets in the forms coding agents
print, and text from real transcripts that holds none.

Positives are generated from templates with values drawn from a seeded generator, so the
corpus is the same on every run and every secret in it is fake. Each case says which
substrings are secrets; a scanner finds a secret only when it replaces every character of
it (a key half replaced still leaks), and takes too much when it replaces a character
outside every secret (the `;` after an assignment).

Negatives are what real agent transcripts are full of and a brief must keep: git shas and
`git log` lines, digests (`sha256sum`, npm integrity, pip hashes, image digests), UUIDs,
base64 data, file paths, test output, and references to secrets that are not secrets
(`${DB_PASSWORD}`, `os.environ["TOKEN"]`). Some are read from this checkout (its git
history, its lock files) when it has them, so they are real, not made up
(secret_corpus_negatives.py).
"""

from __future__ import annotations

import base64
import json
import random
import string
import uuid
import zlib
from dataclasses import dataclass, field

from bench.secret_corpus_negatives import negatives, transcript_entries

_ALNUM = string.ascii_letters + string.digits
_UPPER_ALNUM = string.ascii_uppercase + string.digits
_HEX = "0123456789abcdef"
_B64 = _ALNUM + "+/"
_URLSAFE = _ALNUM + "-_"


@dataclass(frozen=True)
class Case:
    form: str
    text: str
    # Every substring of `text` that is a secret (empty for a negative).
    secrets: tuple[str, ...] = ()
    group: str = field(default="", compare=False)

    @property
    def positive(self) -> bool:
        return bool(self.secrets)


class _Values:
    """Fake secret values, the same on every run."""

    def __init__(self, seed: int = 20261204) -> None:
        self._random = random.Random(seed)

    def chars(self, alphabet: str, n: int) -> str:
        return "".join(self._random.choice(alphabet) for _ in range(n))

    def password(self) -> str:
        # What people and generators pick: letters, digits and a few punctuation marks.
        core = self.chars(_ALNUM, 12) + self._random.choice("!#%^*-_.") + self.chars(_ALNUM, 3)
        return core

    def aws_key_id(self) -> str:
        # AWS key ids are base32: A-Z and 2-7.
        return "AKIA" + self.chars(string.ascii_uppercase + "234567", 16)

    def checksummed(self, prefix: str) -> str:
        """A GitHub or npm token: 30 random characters and the CRC32 of them in base62,
        as the real ones carry (a scanner may check it)."""
        body = self.chars(_ALNUM, 30)
        return prefix + body + _base62(zlib.crc32(body.encode()), 6)

    def aws_secret(self) -> str:
        return self.chars(_ALNUM + "+/", 40)

    def b64(self, n: int) -> str:
        return self.chars(_B64, n)

    def hex(self, n: int) -> str:
        return self.chars(_HEX, n)

    def uuid(self) -> str:
        return str(uuid.UUID(int=self._random.getrandbits(128), version=4))


def _base62(number: int, width: int) -> str:
    digits = string.digits + string.ascii_uppercase + string.ascii_lowercase
    out = ""
    while number:
        number, rest = divmod(number, 62)
        out = digits[rest] + out
    return out.rjust(width, "0")


def _positives(v: _Values) -> list[Case]:
    cases: list[Case] = []

    def add(form: str, text: str, *secrets: str, group: str) -> None:
        for secret in secrets:
            assert secret in text, (form, secret)
        cases.append(Case(form, text, tuple(secrets), group))

    # Credentials files -----------------------------------------------------------
    key_id, secret = v.aws_key_id(), v.aws_secret()
    add("aws credentials file",
        f"$ cat ~/.aws/credentials\n[default]\naws_access_key_id = {key_id}\n"
        f"aws_secret_access_key = {secret}\nregion = eu-west-1\n", key_id, secret,
        group="credentials file")
    secret2 = v.aws_secret()
    add("aws secret key in a profile block",
        f"[profile deploy]\naws_secret_access_key={secret2}\noutput = json\n", secret2,
        group="credentials file")
    pw = v.password()
    add(".netrc", f"machine api.example.com\n  login deploy\n  password {pw}\n", pw,
        group="credentials file")
    token = v.checksummed("npm_")
    add(".npmrc", f"//registry.npmjs.org/:_authToken={token}\n", token, group="credentials file")
    pw = v.password()
    add(".pgpass", f"db.internal:5432:app:app_user:{pw}\n", pw, group="credentials file")
    pw = v.password()
    add("docker config auth", json.dumps({"auths": {"ghcr.io": {
        "auth": base64.b64encode(f"deploy:{pw}".encode()).decode()}}}, indent=2),
        base64.b64encode(f"deploy:{pw}".encode()).decode(), group="credentials file")

    # .env files ------------------------------------------------------------------
    pw, sk = v.password(), "sk_live_" + v.chars(_ALNUM, 24)
    secret_base = v.hex(64)
    add(".env file",
        f"$ cat .env\nNODE_ENV=production\nDATABASE_URL=postgres://app:{pw}@db:5432/app\n"
        f"STRIPE_SECRET_KEY={sk}\nSECRET_KEY_BASE={secret_base}\nPORT=3000\n",
        pw, sk, secret_base, group=".env")
    jwt_secret, session = v.chars(_ALNUM, 32), v.chars(_ALNUM + "-_", 40)
    add(".env quoted values",
        f'JWT_SECRET="{jwt_secret}"\nSESSION_SECRET=\'{session}\'\nDEBUG=false\n',
        jwt_secret, session, group=".env")
    mail = v.password()
    add(".env password", f"MAIL_HOST=smtp.example.com\nMAIL_PASSWORD={mail}\n", mail,
        group=".env")
    client = v.chars(_ALNUM + "-_~.", 34)
    add(".env client secret", f"OAUTH_CLIENT_ID=web-app\nOAUTH_CLIENT_SECRET={client}\n",
        client, group=".env")

    # YAML and TOML configs ------------------------------------------------------------
    pw = v.password()
    add("yaml unquoted password",
        f"database:\n  host: db.internal\n  user: app\n  password: {pw}\n  port: 5432\n",
        pw, group="yaml")
    key = v.chars(_ALNUM, 32)
    add("yaml api key", f"services:\n  maps:\n    api_key: {key}\n    timeout: 30\n", key,
        group="yaml")
    pw = v.password()
    add("yaml quoted password", f'redis:\n  password: "{pw}"\n', pw, group="yaml")
    secret = v.chars(_ALNUM, 40)
    add("yaml client_secret", f"oauth:\n  client_id: app\n  client_secret: {secret}\n", secret,
        group="yaml")
    pw = v.b64(24)
    add("kubernetes secret data",
        f"apiVersion: v1\nkind: Secret\ndata:\n  password: {base64.b64encode(pw.encode()).decode()}\n",
        base64.b64encode(pw.encode()).decode(), group="yaml")
    pw = v.password()
    add("toml password", f'[database]\nuser = "app"\npassword = "{pw}"\n', pw, group="toml")
    token = v.chars(_ALNUM, 40)
    add("toml token", f"[tool.poetry.http-basic.private]\ntoken = '{token}'\n", token,
        group="toml")
    key = v.chars(_ALNUM, 32)
    add("toml api_key", f'[openweather]\napi_key = "{key}"\n', key, group="toml")

    # Shell exports and inline assignments -------------------------------------------------
    gh = v.checksummed("ghp_")
    add("export GITHUB_TOKEN", f"export GITHUB_TOKEN={gh}\n", gh, group="shell")
    secret = v.aws_secret()
    add("export AWS_SECRET_ACCESS_KEY", f"export AWS_SECRET_ACCESS_KEY={secret}\n", secret,
        group="shell")
    pw = v.password()
    add("inline PGPASSWORD", f"$ PGPASSWORD={pw} psql -h db.internal -U app -c 'select 1'\n", pw,
        group="shell")
    pw = v.password()
    add("inline PGPASSWORD then ;", f"PGPASSWORD={pw}; psql -h db -U app\n", pw, group="shell")
    pw = v.password()
    add("inline MYSQL_PWD", f"MYSQL_PWD='{pw}' mysql -u root app < dump.sql\n", pw,
        group="shell")
    pw = v.password()
    add("export quoted password", f'export DB_PASSWORD="{pw}"\n', pw, group="shell")
    pw = v.password()
    add("command line password flag", f"$ mysql -u root --password={pw} app\n", pw,
        group="shell")
    pw = v.password()
    add("docker login -p", f"$ docker login -u deploy -p {pw} registry.example.com\n", pw,
        group="shell")
    pw = v.password()
    add("curl -u", f"$ curl -u admin:{pw} https://jenkins.example.com/api/json\n", pw,
        group="shell")
    token = v.chars(_ALNUM + "-_", 40)
    add("curl bearer header",
        f"$ curl -H 'Authorization: Bearer {token}' https://api.example.com/v1/me\n", token,
        group="shell")
    token = v.chars(_ALNUM, 32)
    add("set -x trace", f"+ HEROKU_API_KEY={token}\n+ heroku releases\n", token, group="shell")

    # Connection URLs of every scheme ----------------------------------------------------------
    for scheme, user, host in (
        ("postgres", "app", "db.internal:5432/app"),
        ("postgresql+psycopg", "app", "localhost/app"),
        ("mysql", "root", "127.0.0.1:3306/shop"),
        ("mongodb+srv", "admin", "cluster0.abcde.mongodb.net/test?retryWrites=true"),
        ("redis", "", "cache.internal:6379/0"),
        ("rediss", "default", "cache.example.com:6380"),
        ("amqp", "guest", "rabbit:5672/%2F"),
        ("https", "deploy", "git.example.com/team/repo.git"),
        ("ftp", "upload", "files.example.com/incoming"),
        ("smtp", "mailer", "smtp.example.com:587"),
        ("sqlserver", "sa", "db:1433;database=app"),
    ):
        pw = v.password()
        add(f"{scheme}:// URL", f"connecting to {scheme}://{user}:{pw}@{host}\n", pw, group="URL")
    pw = v.password()
    add("URL in JSON", json.dumps({"url": f"postgres://app:{pw}@db/app"}), pw, group="URL")

    # JSON key files -----------------------------------------------------------------------------
    key_body = "\\n".join(v.b64(64) for _ in range(8))
    private_key = f"-----BEGIN PRIVATE KEY-----\\n{key_body}\\n-----END PRIVATE KEY-----"
    key_id = v.hex(40)
    sa = ('{\n  "type": "service_account",\n  "project_id": "chess-academy",\n'
          f'  "private_key_id": "{key_id}",\n  "private_key": "{private_key}\\n",\n'
          '  "client_email": "ci@chess-academy.iam.gserviceaccount.com"\n}\n')
    add("gcp service account json", sa, private_key, group="JSON key file")
    key = v.chars(_ALNUM, 40)
    add("json api_key", json.dumps({"name": "maps", "api_key": key}, indent=2), key,
        group="JSON key file")
    secret = v.chars(_ALNUM + "-_", 40)
    add("json client_secret", json.dumps({"installed": {"client_id": "1234.apps",
                                                        "client_secret": secret}}), secret,
        group="JSON key file")
    pw = v.password()
    add("json password", json.dumps({"user": "app", "password": pw}), pw, group="JSON key file")

    # Private keys --------------------------------------------------------------------------------
    body = "\n".join(v.b64(64) for _ in range(6))
    block = f"-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n-----END OPENSSH PRIVATE KEY-----"
    add("openssh private key", f"$ cat ~/.ssh/id_ed25519\n{block}\n", block, group="private key")
    body = "\n".join(v.b64(64) for _ in range(10))
    block = f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----"
    add("rsa private key", f"{block}\n", block, group="private key")

    # Cloud tokens ------------------------------------------------------------------------------------
    key_id = v.aws_key_id()
    add("aws key id alone", f"Using access key {key_id} for s3://backups\n", key_id, group="cloud")
    key = "AIza" + v.chars(_URLSAFE, 35)
    add("google api key", f"const MAPS_KEY = '{key}';\n", key, group="cloud")
    account_key = v.b64(86) + "=="
    add("azure AccountKey", "DefaultEndpointsProtocol=https;AccountName=chessassets;"
        f"AccountKey={account_key};EndpointSuffix=core.windows.net\n", account_key, group="cloud")
    sig = v.chars(_ALNUM + "%", 44)
    add("azure SAS sig", f"https://chessassets.blob.core.windows.net/c?sv=2022-11-02&ss=b&sig={sig}\n",
        sig, group="cloud")
    token = "dop_v1_" + v.hex(64)
    add("digitalocean token", f"doctl auth init -t {token}\n", token, group="cloud")
    key = v.chars(_ALNUM, 32)
    add("azure openai key header", f"api-key: {key}\n", key, group="cloud")

    # VCS tokens ------------------------------------------------------------------------------------
    token = "github_pat_" + v.chars(_ALNUM, 22) + "_" + v.chars(_ALNUM, 59)
    add("github fine-grained PAT", f"gh auth login --with-token <<< {token}\n", token, group="VCS")
    token = v.checksummed("ghp_")
    add("github classic PAT in a remote",
        f"origin  https://x-access-token:{token}@github.com/team/repo.git (fetch)\n", token,
        group="VCS")
    token = v.checksummed("gho_")
    add("github oauth token", f"oauth_token: {token}\n", token, group="VCS")
    token = "glpat-" + v.chars(_URLSAFE, 20)
    add("gitlab PAT", f"GITLAB_TOKEN={token}\n", token, group="VCS")
    token = "ATBB" + v.chars(_ALNUM, 32)
    add("bitbucket app password", f"bitbucket app password: {token}\n", token, group="VCS")

    # Package registries -----------------------------------------------------------------------------
    token = "pypi-AgEIcHlwaS5vcmc" + v.chars(_URLSAFE, 150)
    add("pypi token", f"[pypi]\n  username = __token__\n  password = {token}\n", token,
        group="package registry")
    token = v.checksummed("npm_")
    add("npm token", f"NPM_TOKEN={token} npm publish\n", token, group="package registry")
    token = "rubygems_" + v.hex(48)
    add("rubygems key", f"---\n:rubygems_api_key: {token}\n", token, group="package registry")
    token = "dckr_pat_" + v.chars(_URLSAFE, 27)
    add("docker hub PAT", f"echo {token} | docker login -u deploy --password-stdin\n", token,
        group="package registry")
    token = "oy2" + v.chars(string.ascii_lowercase + string.digits, 43)
    add("nuget key", f"dotnet nuget push pkg.nupkg --api-key {token}\n", token,
        group="package registry")
    token = "cio" + v.chars(_ALNUM, 32)
    add("cargo token", f'[registry]\ntoken = "{token}"\n', token, group="package registry")

    # AI vendors -----------------------------------------------------------------------------------------
    token = "sk-proj-" + v.chars(_URLSAFE, 74) + "T3BlbkFJ" + v.chars(_URLSAFE, 74)
    add("openai project key", f"OPENAI_API_KEY={token}\n", token, group="AI vendor")
    token = "sk-proj-" + v.chars(_URLSAFE, 156)
    add("openai project key in code", f'client = OpenAI(api_key="{token}")\n', token,
        group="AI vendor")
    token = "sk-" + v.chars(_ALNUM, 20) + "T3BlbkFJ" + v.chars(_ALNUM, 20)
    add("openai legacy key", f"openai.api_key = '{token}'\n", token, group="AI vendor")
    token = "sk-ant-api03-" + v.chars(_URLSAFE, 93) + "AA"
    add("anthropic key", f"ANTHROPIC_API_KEY={token}\n", token, group="AI vendor")
    token = "sk-ant-api03-" + v.chars(_URLSAFE, 93) + "AA"
    add("anthropic key in a header", f"x-api-key: {token}\n", token, group="AI vendor")
    token = "hf_" + v.chars(string.ascii_letters, 34)
    add("huggingface token", f"huggingface-cli login --token {token}\n", token, group="AI vendor")
    token = "gsk_" + v.chars(_ALNUM, 52)
    add("groq key", f"export GROQ_API_KEY={token}\n", token, group="AI vendor")
    token = "xai-" + v.chars(_ALNUM, 80)
    add("xai key", f"XAI_API_KEY={token}\n", token, group="AI vendor")
    token = "r8_" + v.chars(_ALNUM, 37)
    add("replicate token", f"REPLICATE_API_TOKEN={token}\n", token, group="AI vendor")

    # Other services ------------------------------------------------------------------------------------
    token = "xoxb-" + v.chars(string.digits, 12) + "-" + v.chars(string.digits, 13) + "-" + v.chars(_ALNUM, 24)
    add("slack bot token", f"SLACK_BOT_TOKEN={token}\n", token, group="service")
    hook = "https://hooks.slack.com/services/T" + v.chars(_UPPER_ALNUM, 8) + "/B" + v.chars(
        _UPPER_ALNUM, 8) + "/" + v.chars(_ALNUM, 24)
    add("slack webhook", f"curl -X POST {hook} -d @msg.json\n", hook, group="service")
    token = "SG." + v.chars(_URLSAFE, 22) + "." + v.chars(_URLSAFE, 43)
    add("sendgrid key", f"sendgrid.api_key = {token}\n", token, group="service")
    token = "SK" + v.hex(32)
    add("twilio key", f"TWILIO_API_KEY={token}\n", token, group="service")
    token = "rk_live_" + v.chars(_ALNUM, 24)
    add("stripe restricted key", f"stripe listen --api-key {token}\n", token, group="service")
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    payload = base64.urlsafe_b64encode(
        json.dumps({"sub": v.uuid(), "role": "admin"}).encode()).decode().rstrip("=")
    token = f"{header}.{payload}.{v.chars(_URLSAFE, 43)}"
    add("jwt", f"token: {token}\n", token, group="service")
    token = v.chars(string.digits, 10) + ":AA" + v.chars(_URLSAFE, 33)
    add("telegram bot token", f"TELEGRAM_BOT_TOKEN={token}\n", token, group="service")
    return cases


def corpus(*, transcripts: bool = True) -> list[Case]:
    values = _Values()
    real = transcript_entries() if transcripts else []
    return [*_positives(values), *negatives(values), *real]


if __name__ == "__main__":
    cases = corpus()
    print(json.dumps([{"form": c.form, "group": c.group, "text": c.text,
                       "secrets": list(c.secrets)} for c in cases], indent=1))
