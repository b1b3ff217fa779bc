"""Secrets never shown: the one redaction every surface uses (console, CLI, logs, telemetry, errors).

:func:`redact` takes settings-shaped data (mappings, lists, strings) and :func:`redact_text` any
text (a log line, an error message, a command line). Both replace with :data:`REDACTED`:

- the value of anything *named* like a secret (a mapping key, an ``env`` variable, a header, a
  ``--flag VALUE`` / ``--flag=VALUE`` argument, a ``NAME=VALUE`` or ``Name: value`` in text), by the
  words of its name: key, token, secret, pass(word), pat, auth(orization), cookie, credential,
  private, session, signature (``GITHUB_PAT``, ``OPENAI_KEY``, ``X-Auth``, ``Cookie``, ``--api-key``);
  a name ending in a word that says it is not the secret itself (``token_url``, ``session_timeout``,
  ``key_prefix``) is left alone, and so are numbers and booleans;
- every value of an ``env`` or ``headers`` table, whatever its name;
- the password of a URL's userinfo and every value of its query, wherever a URL appears;
- values shaped like credentials wherever they appear: ``sk-…``, ``ghp_…`` (and ``gho_``, ``ghu_``,
  ``ghs_``, ``ghr_``), ``github_pat_…``, ``xoxb-``/``xoxp-`` Slack tokens, JWTs (``eyJ…``), AWS access
  key ids (``AKIA…``, ``ASIA…``), ``Bearer``/``Basic`` credentials, and long random-looking strings
  (32 characters or more mixing upper and lower case letters and digits, with the character spread of
  random text rather than of words).

Written by hand with :mod:`re`: the name and shape rules are this project's own policy. Each
pattern starts only where a name or a URL can start (a look-behind, not ``\b``), so a long run of
``a.a.a…`` costs linear time, not quadratic. Pure hex strings and UUIDs (digests, ids) are not redacted by shape;
under a secret name they are.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

#: What a secret is replaced with, on every surface.
REDACTED = "[redacted]"

#: Words (of a name split at ``_ - .`` spaces and camel case) that make the name a secret's.
SECRET_WORDS = frozenset({
    "key", "keys", "apikey", "token", "tokens", "secret", "secrets", "pass", "password", "passwd", "passphrase",
    "pwd", "pat", "auth", "authorization", "cookie", "cookies", "credential", "credentials", "private",
    "privatekey", "session", "sessionid", "signature", "sig", "jwt", "bearer", "otp",
})
#: A compound word ending like this is a secret's name too (``accesstoken``, ``xapikey``).
SECRET_ENDINGS = ("key", "token", "secret", "password", "passwd", "cookie", "credential", "credentials")
#: A name whose last word is one of these names something about the secret, not the secret itself.
NOT_SECRET_TAIL = frozenset({
    "url", "uri", "endpoint", "path", "file", "dir", "prefix", "timeout", "ttl", "seconds", "ms", "max",
    "min", "limit", "limits", "count", "size", "length", "header", "name", "names", "scope", "scopes", "type",
    "issuer", "audience", "algorithm", "algorithms", "mode", "enabled", "required", "id_claim", "claim",
    "error", "exception",  # KeyError: 'depth' names what went wrong, never a secret
})
#: Tables whose every value is redacted, whatever its name.
SECRET_TABLES = frozenset({"env", "environment", "headers"})

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_URL = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>`]+")
_SHAPES = re.compile(
    r"\bsk-[A-Za-z0-9_-]{16,}"
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"
    r"|\bgithub_pat_[A-Za-z0-9_]{20,}"
    r"|\bxox[abposr]-[A-Za-z0-9-]{10,}"
    r"|\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"
    r"|\b(?:Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]{6,}"
)
_LONG = re.compile(r"[A-Za-z0-9+_=-]{32,}")
#: ``--name value`` / ``--name=value`` / ``-name value`` in a command line.
_FLAG = re.compile(r"(?<![\w.-])(--?[A-Za-z][A-Za-z0-9_.-]*)(=|\s+)(\"[^\"]*\"|'[^']*'|[^\s\"'-][^\s\"']*)")
#: ``NAME=value``, ``name: value``, ``"name": "value"`` in text (an env line, a header, JSON).
_ASSIGN = re.compile(r"(?<![\w.-])([\"']?)([A-Za-z][A-Za-z0-9_.-]*)\1(\s*[:=]\s*)"
                     r"(\"[^\"]*\"|'[^']*'|[^\s,;\"'}\][][^\s,;\"'}\]]*)")


def is_secret_name(name: str) -> bool:
    """Whether ``name`` (a setting, an environment variable, a header, a flag) names a secret."""
    words = [w.lower() for w in _WORD.findall(name)]
    if not words or words[-1] in NOT_SECRET_TAIL:
        return False
    return any(w in SECRET_WORDS or (len(w) > 4 and w.endswith(SECRET_ENDINGS)) for w in words)


def looks_random(text: str) -> bool:
    """Whether ``text`` (one token, 32+ characters) is shaped like a generated credential: upper and
    lower case letters and digits, spread like random characters (not a camelCase identifier), and
    not a hex digest or UUID."""
    if len(text) < 32 or not (any(c.isupper() for c in text) and any(c.islower() for c in text)
                              and any(c.isdigit() for c in text)):
        return False
    counts = Counter(text)
    entropy = -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())
    return entropy >= 4.2


def redact_text(text: str) -> str:
    """``text`` with every secret this module knows replaced by :data:`REDACTED` (see the module's
    docstring); text without one comes back unchanged."""
    if not text:
        return text
    text = _URL.sub(lambda m: _redact_url(m.group(0)), text)
    text = _SHAPES.sub(REDACTED, text)
    text = _FLAG.sub(_flag, text)
    text = _ASSIGN.sub(_assign, text)
    return _LONG.sub(lambda m: REDACTED if looks_random(m.group(0)) else m.group(0), text)


def redact(value: Any, key: str = "") -> Any:
    """``value`` as plain JSON-able data with secrets replaced: what a key naming a secret holds
    (a string or a list; a table under it is judged key by key), every value of an ``env`` or ``headers`` table, values
    after secret-naming flags in argument lists, and secrets in any string (:func:`redact_text`)."""
    if key and isinstance(value, str | list | tuple) and value and is_secret_name(key):
        return REDACTED
    if isinstance(value, Mapping):
        if key.lower() in SECRET_TABLES:
            return {str(k): REDACTED if v not in (None, "") else v for k, v in value.items()}
        return {str(k): redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return _redact_args(list(value))
    if isinstance(value, str):
        return redact_text(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    return redact_text(str(value))


def _redact_args(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    secret_next = False
    for item in items:
        if secret_next and isinstance(item, str) and not item.startswith("-"):
            out.append(REDACTED)
            secret_next = False
            continue
        secret_next = (isinstance(item, str) and item.startswith("-") and "=" not in item
                       and is_secret_name(item.lstrip("-")))
        out.append(redact(item))
    return out


def _flag(match: re.Match[str]) -> str:
    flag, sep, value = match.groups()
    if not is_secret_name(flag.lstrip("-")) or value == REDACTED:
        return match.group(0)
    return f"{flag}{sep}{REDACTED}"


def _assign(match: re.Match[str]) -> str:
    quote, name, sep, value = match.groups()
    if not is_secret_name(name) or value.strip("\"'") in (REDACTED, ""):
        return match.group(0)
    if value[:1] in "\"'":
        return f"{quote}{name}{quote}{sep}{value[0]}{REDACTED}{value[0]}"
    return f"{quote}{name}{quote}{sep}{REDACTED}"


def _redact_url(text: str) -> str:
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return text
    netloc = parts.netloc
    if "@" in netloc:
        user = parts.username or ""
        host = (parts.hostname or "") + (f":{port}" if port else "")
        if parts.password is not None:
            netloc = f"{user}:{REDACTED}@{host}"
        elif _SHAPES.search(user) or looks_random(user) or len(user) >= 20:
            netloc = f"{REDACTED}@{host}"  # a token as the user name (https://TOKEN@host)
    query = parts.query
    if query:
        query = "&".join(f"{pair.partition('=')[0]}={REDACTED}" if "=" in pair else pair
                         for pair in query.split("&"))
    if netloc == parts.netloc and query == parts.query:
        return text
    return urlunsplit(parts._replace(netloc=netloc, query=query))


class RedactingFilter(logging.Filter):
    """A logging filter that redacts each record's message (and its traceback) before any handler
    formats it; :func:`redact_logs` puts one on the root logger's handlers."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            return True  # a record that cannot be formatted is the logging module's to report
        cleaned = redact_text(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info))
        return True


def redact_logs(logger: logging.Logger | None = None) -> None:
    """Put a :class:`RedactingFilter` on every handler of ``logger`` (default: the root logger),
    once each: every record that reaches them, from any logger, is redacted."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
