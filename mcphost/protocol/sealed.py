"""Integrity-protected MRTR ``requestState``: the server's memory between an InputRequiredResult and the retry.

The 2026-07-28 revision keeps nothing server-side between the two rounds of a multi-round tool
call (or prompt / resource read): whatever the server needs on the retry travels in
``requestState``, which the client echoes verbatim. The client is not trusted with it, so a state
minted by :class:`StateSealer` is

* **signed** with HMAC-SHA256 under the first configured key; every configured key verifies, so keys
  rotate by putting the new key first and keeping the old one second for one TTL;
* **bound** to the principal (stored as a hash), the method and :func:`params_digest` of the
  originating request, so it cannot be replayed by someone else, on another tool or with other
  arguments;
* **short-lived**: rejected once older than ``ttl`` seconds, or when it claims to be minted more
  than 60 s in the future.

The payload is signed, not encrypted: the client can read it. Put only the collected answers and
non-secret bookkeeping in it.

Token format (ASCII, no padding): ``v1.<kid>.<b64url(JSON payload)>.<b64url(HMAC)>`` where ``kid``
is the first 8 hex digits of SHA-256 of the key and the MAC covers ``v1.<kid>.<payload>``.

Every rejection — not a string, too long, malformed, unknown key, bad MAC, expired, from the future,
another principal, another method or other params — raises the same :class:`StateRejected`
(-32602, ``"Invalid or expired requestState"``, no data), so the wire never tells an attacker which
check failed. ``StateRejected.reason`` says it for server-side diagnostics; never log the token
itself (:func:`token_fingerprint` gives a short hash to log instead).

A ``requestState`` of ``None`` (JSON ``null``) or an absent one is *no state*: callers must check
for that before calling :meth:`StateSealer.open`, which rejects ``None`` like any other non-string.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from mcphost.protocol.errors import INVALID_PARAMS, McpError

STATE_VERSION: Final = "v1"
#: Longest ``requestState`` accepted (characters); longer ones are rejected unread.
MAX_STATE_LENGTH: Final = 64 * 1024
#: How far in the future a state's issue time may lie (clock skew between replicas).
MAX_CLOCK_SKEW: Final = 60.0
DEFAULT_TTL: Final = 600.0
REJECTION_MESSAGE: Final = "Invalid or expired requestState"
#: ``params`` members that differ between the first request and its retry, left out of the digest.
DIGEST_EXCLUDED: Final = frozenset(("_meta", "inputResponses", "requestState"))
_MIN_KEY_BYTES: Final = 16


class StateRejected(McpError):
    """The one error for any unusable ``requestState``; its wire form never varies."""

    def __init__(self, reason: str = "rejected") -> None:
        super().__init__(INVALID_PARAMS, REJECTION_MESSAGE)
        #: Why, for server-side diagnostics only; not part of :meth:`to_error`.
        self.reason = reason

    def __repr__(self) -> str:
        return f"StateRejected({self.reason!r})"


@dataclass(frozen=True)
class SealedState:
    """What an opened ``requestState`` carried."""

    answers: dict[str, Any]
    extra: dict[str, Any] | None
    issued_at: float
    #: Random per token; lets a caller enforce one-time use if it needs to.
    nonce: str


def key_id(key: bytes) -> str:
    """The public identifier of a key: the first 8 hex digits of its SHA-256."""
    return hashlib.sha256(key).hexdigest()[:8]


def token_fingerprint(token: object) -> str:
    """A short hash of a state, safe to log in place of the state itself."""
    data = token.encode("utf-8", "surrogatepass") if isinstance(token, str) else repr(type(token)).encode()
    return hashlib.sha256(data).hexdigest()[:12]


def _canonical(value: Any) -> bytes:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, TypeError):
        # Integers beyond 64 bits and the like: the standard library still gives a stable form.
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
            "utf-8", "surrogatepass"
        )


def params_digest(method: str, params: dict[str, Any] | None) -> str:
    """SHA-256 (hex) of the method and its params, minus ``_meta``, ``inputResponses``, ``requestState``.

    Canonical JSON (sorted keys at every level), so key order does not matter; values do, so the
    retry must repeat the original params, as the specification requires.
    """
    core = {key: value for key, value in (params or {}).items() if key not in DIGEST_EXCLUDED}
    return hashlib.sha256(_canonical([method, core])).hexdigest()


def _principal_tag(principal: str | None) -> str | None:
    if principal is None:
        return None
    return hashlib.sha256(b"mcphost-principal\x00" + principal.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64(data) != text:  # only the canonical encoding is accepted
        raise ValueError("non-canonical base64")
    return data


class StateSealer:
    """Mints and opens ``requestState`` tokens; see the module docstring."""

    def __init__(
        self,
        keys: Sequence[bytes],
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.rekey(keys)
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        self.ttl = float(ttl)
        self._clock = clock

    def rekey(self, keys: Sequence[bytes]) -> None:
        """Sign with ``keys[0]`` from now on; every key in ``keys`` verifies.

        How a cluster rotates: every process swaps in the key ring it reads from the shared
        backend, so a state sealed on one process opens on any other.
        """
        if not keys:
            raise ValueError("StateSealer needs at least one key")
        for key in keys:
            if not isinstance(key, bytes) or len(key) < _MIN_KEY_BYTES:
                raise ValueError(f"requestState keys must be bytes of at least {_MIN_KEY_BYTES} bytes")
        verifying: dict[str, list[bytes]] = {}
        for key in keys:
            verifying.setdefault(key_id(key), []).append(key)
        # One assignment each, no await in between: a seal never mixes a key and another's id.
        self._signing, self._signing_id, self._verifying = keys[0], key_id(keys[0]), verifying

    @staticmethod
    def _mac(key: bytes, signed: str) -> str:
        return _b64(hmac.new(key, signed.encode("ascii"), hashlib.sha256).digest())

    def seal(
        self,
        *,
        answers: dict[str, Any],
        principal: str | None,
        method: str,
        params_digest: str,
        extra: dict[str, Any] | None = None,
    ) -> str:
        """A new ``requestState`` carrying ``answers`` (and ``extra``), bound to the request.

        Raises ``ValueError`` when the result would exceed :data:`MAX_STATE_LENGTH` (it could never
        be opened) and ``TypeError`` when the values are not JSON-serializable.
        """
        payload = {
            "a": answers,
            "x": extra,
            "p": _principal_tag(principal),
            "m": method,
            "d": params_digest,
            "t": self._clock(),
            "n": secrets.token_urlsafe(12),
        }
        signed = f"{STATE_VERSION}.{self._signing_id}.{_b64(orjson.dumps(payload))}"
        token = f"{signed}.{self._mac(self._signing, signed)}"
        if len(token) > MAX_STATE_LENGTH:
            raise ValueError("requestState would exceed the maximum length")
        return token

    def open(
        self,
        token: object,
        *,
        principal: str | None,
        method: str,
        params_digest: str,
    ) -> SealedState:
        """Verify ``token`` and return what it carries, or raise :class:`StateRejected`.

        ``None`` is rejected like any other non-string: treat a null/absent state as "no state"
        before calling this.
        """
        if not isinstance(token, str):
            raise StateRejected("not a string")
        if len(token) > MAX_STATE_LENGTH:
            raise StateRejected("too long")
        parts = token.split(".")
        if len(parts) != 4 or parts[0] != STATE_VERSION:
            raise StateRejected("malformed")
        _, kid, body, mac = parts
        candidates = self._verifying.get(kid)
        if candidates is None:
            raise StateRejected("unknown key")
        signed = token[: -len(mac) - 1]
        received = mac.encode("utf-8", "surrogatepass")
        verified = False
        for key in candidates:
            # (signed is ASCII whenever the MAC can match; encode errors mean tampering)
            try:
                expected = self._mac(key, signed).encode("ascii")
            except UnicodeEncodeError:
                raise StateRejected("malformed") from None
            verified |= hmac.compare_digest(expected, received)
        if not verified:
            raise StateRejected("bad signature")
        try:
            payload = orjson.loads(_unb64(body))
        except (ValueError, binascii.Error, orjson.JSONDecodeError):
            raise StateRejected("malformed payload") from None
        state = self._parse(payload)
        now = self._clock()
        if state.issued_at > now + MAX_CLOCK_SKEW:
            raise StateRejected("issued in the future")
        if now - state.issued_at > self.ttl:
            raise StateRejected("expired")
        # The payload is authentic at this point; plain comparisons are fine.
        if payload["p"] != _principal_tag(principal):
            raise StateRejected("other principal")
        if payload["m"] != method:
            raise StateRejected("other method")
        if payload["d"] != params_digest:
            raise StateRejected("other params")
        return state

    @staticmethod
    def _parse(payload: object) -> SealedState:
        if not isinstance(payload, dict):
            raise StateRejected("malformed payload")
        answers, extra, issued = payload.get("a"), payload.get("x"), payload.get("t")
        nonce = payload.get("n")
        if (
            not isinstance(answers, dict)
            or (extra is not None and not isinstance(extra, dict))
            or isinstance(issued, bool)
            or not isinstance(issued, int | float)
            or not isinstance(payload.get("m"), str)
            or not isinstance(payload.get("d"), str)
            or not (payload.get("p") is None or isinstance(payload.get("p"), str))
            or not isinstance(nonce, str)
        ):
            raise StateRejected("malformed payload")
        return SealedState(answers=answers, extra=extra, issued_at=float(issued), nonce=nonce)
