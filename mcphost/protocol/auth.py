"""Pure helpers of the OAuth resource-server side: scopes, bearer credentials, challenges, resource URLs.

Nothing here does I/O or knows a transport. The kernel uses the scope rule; the HTTP transport
and the app use the rest to read credentials and to compose ``WWW-Authenticate`` challenges.

Scope hierarchy: ``:`` separates levels, and a granted scope implies every scope below it. A
token granting ``files`` may do what ``files:read`` and ``files:read:secret`` allow; a token
granting ``files:read`` may not do what ``files`` or ``files:write`` require. Scopes are
compared exactly otherwise (no wildcards, no case folding).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Set
from typing import Any
from urllib.parse import urlsplit, urlunsplit

SCOPE_SEPARATOR = ":"
WELL_KNOWN_PRM = "/.well-known/oauth-protected-resource"
#: RFC 6749 §3.3 scope-token: printable ASCII except space, ``"`` and ``\``.
SCOPE_TOKEN = re.compile(r'^[\x21\x23-\x5B\x5D-\x7E]+$')
#: RFC 7235 token (auth-scheme, auth-param names).
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
#: RFC 6750 b64token / RFC 7235 token68.
_TOKEN68 = re.compile(r"^[A-Za-z0-9\-._~+/]+=*$")
_HOST = re.compile(r"^(?:[A-Za-z0-9.\-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$")
#: Challenge parameters in the order they are written; others follow in their given order.
_ORDER = ("realm", "error", "scope", "resource_metadata", "error_description", "error_uri")


# -- scopes --------------------------------------------------------------------------------------------

def scope_satisfied(granted: Set[str], needed: str) -> bool:
    """Whether ``granted`` covers ``needed``: the scope itself or any ancestor of it (``a`` covers ``a:b``).

    The one place the hierarchy rule lives.
    """
    if needed in granted:
        return True
    cut = needed.rfind(SCOPE_SEPARATOR)
    while cut > 0:
        needed = needed[:cut]
        if needed in granted:
            return True
        cut = needed.rfind(SCOPE_SEPARATOR)
    return False


#: What a caller may use: None for everything (a trusted local client), else the scopes its token grants.
Grant = frozenset[str] | None
NO_SCOPES: frozenset[str] = frozenset()


def grant_of(principal: Any, trusted: bool) -> Grant:
    """What a caller may use: its token's scopes; everything for a trusted anonymous (local) client;
    nothing that needs a scope for an anonymous network client."""
    if principal is not None:
        return frozenset(principal.scopes)
    return None if trusted else NO_SCOPES


def permits(grant: Grant, needed: frozenset[str]) -> bool:
    """Whether a caller holding ``grant`` may use a record that needs ``needed``."""
    if not needed or grant is None:
        return True
    return all(scope_satisfied(grant, scope) for scope in needed)


def missing_scopes(granted: Set[str], required: Iterable[str]) -> list[str]:
    """The scopes of ``required`` that ``granted`` does not cover, sorted."""
    return sorted(scope for scope in required if not scope_satisfied(granted, scope))


# -- credentials ---------------------------------------------------------------------------------------

def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` value; None when absent or not a bearer token.

    The scheme is case-insensitive. A value that is not exactly one token68 after the scheme
    (several comma-joined credentials, spaces, quotes) yields None: guessing which part was meant
    would let one header smuggle another credential.
    """
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    token = token.strip(" \t")
    if not token or not _TOKEN68.match(token):
        return None
    return token


# -- challenges ----------------------------------------------------------------------------------------

def clean(value: str) -> str:
    """``value`` fit for a header: control characters (CR, LF...) dropped, non-ASCII replaced by ``?``."""
    return "".join(ch if " " <= ch <= "~" else ("?" if ch > "~" else "") for ch in value)


def quote(value: str) -> str:
    """An RFC 7235 quoted-string of ``value``, cleaned, with ``"`` and ``\\`` escaped."""
    return '"' + clean(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_challenge(text: str) -> tuple[str, list[tuple[str, str]]]:
    """``scheme`` and ``(name, value)`` pairs of one challenge, leniently.

    Parsing stops at the first thing that is not ``name=token`` or ``name="quoted"``: what was
    read up to there is kept, the rest dropped, so a malformed challenge can never carry text
    into the header that was not meant as a parameter.
    """
    text = clean(text).strip()
    match = _TOKEN.match(text)
    if match is None:
        return "", []
    scheme, pos, params = match.group(), match.end(), []
    length = len(text)
    while pos < length:
        while pos < length and text[pos] in " ,":
            pos += 1
        name = _TOKEN.match(text, pos)
        if name is None:
            break
        pos = name.end()
        while pos < length and text[pos] == " ":
            pos += 1
        if pos >= length or text[pos] != "=":
            break
        pos += 1
        while pos < length and text[pos] == " ":
            pos += 1
        if pos < length and text[pos] == '"':
            value, pos = _read_quoted(text, pos + 1)
            if value is None:
                break
        else:
            token = _TOKEN.match(text, pos)
            if token is None:
                break
            value, pos = token.group(), token.end()
        params.append((name.group().lower(), value))
        while pos < length and text[pos] == " ":
            pos += 1
        if pos < length and text[pos] != ",":
            break
    return scheme, params


def _read_quoted(text: str, pos: int) -> tuple[str | None, int]:
    out: list[str] = []
    while pos < len(text):
        ch = text[pos]
        if ch == "\\" and pos + 1 < len(text):
            out.append(text[pos + 1])
            pos += 2
        elif ch == '"':
            return "".join(out), pos + 1
        else:
            out.append(ch)
            pos += 1
    return None, pos  # unterminated


def render_challenge(scheme: str, params: Iterable[tuple[str, str]]) -> str:
    """``scheme name="value", ...`` with every value quoted and escaped, in the conventional order."""
    items = list(params)
    rank = {name: index for index, name in enumerate(_ORDER)}
    items.sort(key=lambda item: rank.get(item[0], len(_ORDER)))
    rendered = ", ".join(f"{name}={quote(value)}" for name, value in items if _TOKEN.fullmatch(name))
    return f"{scheme} {rendered}" if rendered else scheme


def bearer_challenge(*, error: str | None = None, description: str | None = None, scope: Iterable[str] = (),
                     **params: str) -> str:
    """A well-formed ``Bearer`` challenge; every value is escaped (no header injection)."""
    items: list[tuple[str, str]] = []
    if error:
        items.append(("error", error))
    scopes = " ".join(scope)
    if scopes:
        items.append(("scope", scopes))
    if description:
        items.append(("error_description", description))
    items.extend((name, value) for name, value in params.items() if value is not None)
    return render_challenge("Bearer", items)


def compose_challenge(text: str, *, resource_metadata: str | None, scope: str | None) -> str:
    """A plugin's challenge made complete and safe.

    A ``Bearer`` challenge gets ``resource_metadata`` (when the host serves the document) and
    ``scope`` where it lacks them, and is rewritten with every value escaped. Any other scheme is
    only cleaned of control characters.
    """
    scheme, params = parse_challenge(text)
    if scheme.lower() != "bearer":
        return clean(text)
    names = {name for name, _ in params}
    if resource_metadata and "resource_metadata" not in names:
        params.append(("resource_metadata", resource_metadata))
    if scope and "scope" not in names:
        params.append(("scope", scope))
    return render_challenge("Bearer", params)


# -- the canonical resource URL ---------------------------------------------------------------------------

def canonical_resource_url(url: str) -> str:
    """``url`` as the canonical URI of an MCP endpoint (RFC 8707 / RFC 9728 ``resource``).

    Lower-case scheme and host, no default port, no fragment, no query, no trailing slash
    (except for a bare origin). Raises ValueError saying what is wrong.
    """
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{url!r} is not a valid URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError(f"{url!r} must be an absolute http(s) URL")
    if not parts.hostname:
        raise ValueError(f"{url!r} has no host")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{url!r} must not contain user information")
    if parts.fragment or url.strip().endswith("#"):
        raise ValueError(f"{url!r} must not contain a fragment")
    if parts.query:
        raise ValueError(f"{url!r} must not contain a query")
    hostname = parts.hostname.lower()
    host = f"[{hostname}]" if ":" in hostname else hostname
    if port is not None and not ((scheme == "http" and port == 80) or (scheme == "https" and port == 443)):
        host = f"{host}:{port}"
    path = parts.path.rstrip("/")
    return urlunsplit((scheme, host, path, "", ""))


def metadata_url(resource_url: str) -> str:
    """Where RFC 9728 puts the metadata of ``resource_url``: the well-known prefix before its path."""
    parts = urlsplit(resource_url)
    return urlunsplit((parts.scheme, parts.netloc, WELL_KNOWN_PRM + parts.path.rstrip("/"), "", ""))


def request_resource_url(scheme: str, host_header: str, path: str) -> str:
    """The resource URL as a request sees it (``scheme://Host<path>``), canonicalized.

    A Host header that is not a plain ``name[:port]`` is not echoed: ``localhost`` stands in.
    """
    if _HOST.match(host_header):
        try:
            return canonical_resource_url(f"{scheme}://{host_header}{path}")
        except ValueError:
            pass
    return canonical_resource_url(f"{scheme}://localhost{path}")
