"""Integrity-protected MRTR ``requestState`` (``mcphost.protocol.sealed``)."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcphost.protocol.errors import INVALID_PARAMS
from mcphost.protocol.sealed import (
    MAX_STATE_LENGTH,
    REJECTION_MESSAGE,
    SealedState,
    StateRejected,
    StateSealer,
    key_id,
    params_digest,
    token_fingerprint,
)

KEY = b"k" * 32
OLD = b"o" * 32
OTHER = b"x" * 32
METHOD = "tools/call"
PARAMS = {"name": "book", "arguments": {"date": "2026-08-01"}}
DIGEST = params_digest(METHOD, PARAMS)
EXPECTED_ERROR = {"code": INVALID_PARAMS, "message": REJECTION_MESSAGE}


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def sealer(keys: tuple[bytes, ...] = (KEY,), *, clock: Clock | None = None, ttl: float = 600.0) -> StateSealer:
    return StateSealer(keys, ttl=ttl, clock=clock or Clock())


def seal(s: StateSealer, *, principal: str | None = "alice", method: str = METHOD, digest: str = DIGEST,
         answers: dict[str, Any] | None = None, extra: dict[str, Any] | None = None) -> str:
    return s.seal(answers=answers if answers is not None else {"confirm": {"action": "accept"}},
                  principal=principal, method=method, params_digest=digest, extra=extra)


def open_(s: StateSealer, token: object, *, principal: str | None = "alice", method: str = METHOD,
          digest: str = DIGEST) -> SealedState:
    return s.open(token, principal=principal, method=method, params_digest=digest)


def assert_rejected(s: StateSealer, token: object, **kwargs: Any) -> StateRejected:
    with pytest.raises(StateRejected) as info:
        open_(s, token, **kwargs)
    error = info.value
    assert error.to_error() == EXPECTED_ERROR
    assert str(error) == REJECTION_MESSAGE
    return error


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forge(key: bytes, payload: dict[str, Any]) -> str:
    """A token signed with ``key`` around an arbitrary payload (tests the checks after the MAC)."""
    import hashlib
    import hmac

    signed = f"v1.{key_id(key)}.{_b64(orjson.dumps(payload))}"
    return signed + "." + _b64(hmac.new(key, signed.encode(), hashlib.sha256).digest())


# ---------------------------------------------------------------- round trip


def test_round_trip() -> None:
    clock = Clock()
    s = sealer(clock=clock)
    token = seal(s, extra={"step": 2})
    assert isinstance(token, str)
    assert token.isascii()
    assert token.startswith(f"v1.{key_id(KEY)}.")
    state = open_(s, token)
    assert state.answers == {"confirm": {"action": "accept"}}
    assert state.extra == {"step": 2}
    assert state.issued_at == clock.now
    assert state.nonce


def test_round_trip_anonymous_principal_and_no_extra() -> None:
    s = sealer()
    state = open_(s, seal(s, principal=None, answers={}), principal=None)
    assert state.answers == {}
    assert state.extra is None


def test_tokens_are_unique() -> None:
    s = sealer()
    assert seal(s) != seal(s)


def test_principal_not_readable_in_token() -> None:
    s = sealer()
    token = seal(s, principal="alice@example.com")
    payload = base64.urlsafe_b64decode(token.split(".")[2] + "==")
    assert b"alice" not in payload


def test_key_id() -> None:
    assert len(key_id(KEY)) == 8
    assert key_id(KEY) != key_id(OLD)


def test_constructor_validation() -> None:
    with pytest.raises(ValueError):
        StateSealer([])
    with pytest.raises(ValueError):
        StateSealer([b"short"])
    with pytest.raises(ValueError):
        StateSealer([KEY], ttl=0)


def test_seal_refuses_oversized_state() -> None:
    with pytest.raises(ValueError):
        seal(sealer(), answers={"big": "x" * MAX_STATE_LENGTH})


# ---------------------------------------------------------------- rejections: one fixed error


def test_every_rejection_cause_gives_the_identical_error() -> None:
    clock = Clock()
    s = sealer(clock=clock)
    good = seal(s)
    kid = key_id(KEY)
    now = clock.now
    base = {"a": {}, "x": None, "p": None, "m": METHOD, "d": DIGEST, "t": now, "n": "n"}
    causes: dict[str, tuple[object, dict[str, Any]]] = {
        "none": (None, {}),
        "int": (5, {}),
        "dict": ({"state": good}, {}),
        "bytes": (good.encode(), {}),
        "empty": ("", {}),
        "too long": (good + "A" * MAX_STATE_LENGTH, {}),
        "malformed": ("not-a-token", {}),
        "three parts": (good.rsplit(".", 1)[0], {}),
        "five parts": (good + ".x", {}),
        "other version": ("v2" + good[2:], {}),
        "unknown key": (seal(sealer((OTHER,))), {}),
        "key id swapped": (good.replace(kid, key_id(OTHER), 1), {}),
        "bad mac": (good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB"), {}),
        "empty mac": (good.rsplit(".", 1)[0] + ".", {}),
        "tampered suffix": (good + "-TAMPERED", {}),
        "non-ascii": (good[:-1] + "é", {}),
        "surrogate": (good[:-1] + "\ud800", {}),
        "other principal": (good, {"principal": "mallory"}),
        "anonymous vs named": (good, {"principal": None}),
        "other method": (good, {"method": "prompts/get"}),
        "other params": (good, {"digest": params_digest(METHOD, {"name": "book", "arguments": {}})}),
        "payload not object": (forge(KEY, [1]), {}),  # type: ignore[arg-type]
        "payload missing fields": (forge(KEY, {"a": {}}), {"principal": None}),
        "answers not object": (forge(KEY, {**base, "a": [1]}), {"principal": None}),
        "bool time": (forge(KEY, {**base, "t": True}), {"principal": None}),
    }
    for cause, (token, kwargs) in causes.items():
        error = assert_rejected(s, token, **kwargs)
        assert error.data is None, cause
    # and the forged payload itself is fine when well-formed (so the cases above test what they say)
    assert open_(s, forge(KEY, base), principal=None).answers == {}


def test_reason_is_server_side_only() -> None:
    s = sealer()
    error = assert_rejected(s, seal(s), principal="mallory")
    assert error.reason == "other principal"
    assert "mallory" not in repr(error.to_error())


def test_expiry() -> None:
    clock = Clock()
    s = sealer(clock=clock, ttl=60)
    token = seal(s)
    clock.now += 60
    open_(s, token)
    clock.now += 0.001
    assert assert_rejected(s, token).reason == "expired"


def test_future_skew() -> None:
    clock = Clock()
    minting = sealer(clock=Clock(clock.now + 60))
    open_(sealer(clock=clock), seal(minting))
    minting_far = sealer(clock=Clock(clock.now + 60.5))
    assert assert_rejected(sealer(clock=clock), seal(minting_far)).reason == "issued in the future"


def test_rotation() -> None:
    old_sealer = sealer((OLD,))
    token = seal(old_sealer)
    rotated = sealer((KEY, OLD))
    assert open_(rotated, token).answers == {"confirm": {"action": "accept"}}
    new_token = seal(rotated)
    assert new_token.split(".")[1] == key_id(KEY)
    open_(rotated, new_token)
    assert_rejected(old_sealer, new_token)  # old-only verifier does not know the new key
    assert_rejected(sealer((KEY,)), token)  # old key retired


def test_binding() -> None:
    s = sealer()
    token = seal(s, principal="alice", method="prompts/get", digest="d1")
    open_(s, token, principal="alice", method="prompts/get", digest="d1")
    assert_rejected(s, token, principal="bob", method="prompts/get", digest="d1")
    assert_rejected(s, token, principal="alice", method="tools/call", digest="d1")
    assert_rejected(s, token, principal="alice", method="prompts/get", digest="d2")


@settings(max_examples=300)
@given(data=st.data())
def test_tampering_any_character_is_rejected(data: st.DataObject) -> None:
    s = sealer()
    token = seal(s, extra={"step": 1})
    index = data.draw(st.integers(0, len(token) - 1), label="index")
    replacement = data.draw(st.characters(codec="utf-8").filter(lambda ch: ch != token[index]), label="char")
    assert_rejected(s, token[:index] + replacement + token[index + 1 :])


@settings(max_examples=100)
@given(data=st.data())
def test_deleting_or_inserting_is_rejected(data: st.DataObject) -> None:
    s = sealer()
    token = seal(s)
    index = data.draw(st.integers(0, len(token) - 1))
    assert_rejected(s, token[:index] + token[index + 1 :])
    char = data.draw(st.sampled_from("A-_.=0"))
    assert_rejected(s, token[:index] + char + token[index:])


@given(st.text(max_size=300))
def test_arbitrary_strings_rejected(text: str) -> None:
    assert_rejected(sealer(), text)


# ---------------------------------------------------------------- params_digest


def test_params_digest_ignores_mrtr_and_meta_members() -> None:
    retry = {
        **PARAMS,
        "_meta": {"progressToken": 9},
        "inputResponses": {"confirm": {"action": "accept"}},
        "requestState": "v1.x.y.z",
    }
    assert params_digest(METHOD, retry) == DIGEST


def test_params_digest_ignores_key_order_at_every_level() -> None:
    a = {"name": "t", "arguments": {"x": 1, "y": {"p": 1, "q": 2}}}
    b = {"arguments": {"y": {"q": 2, "p": 1}, "x": 1}, "name": "t"}
    assert params_digest(METHOD, a) == params_digest(METHOD, b)


def test_params_digest_sensitive_to_method_and_values() -> None:
    assert params_digest("prompts/get", PARAMS) != DIGEST
    assert params_digest(METHOD, {**PARAMS, "arguments": {"date": "2026-08-02"}}) != DIGEST
    assert params_digest(METHOD, {**PARAMS, "extra": None}) != DIGEST


def test_params_digest_shape() -> None:
    digest = params_digest(METHOD, None)
    assert len(digest) == 64
    assert digest == params_digest(METHOD, {})
    int(digest, 16)
    assert len(params_digest(METHOD, {"n": 10**30})) == 64  # beyond orjson's 64-bit range


def test_token_fingerprint() -> None:
    s = sealer()
    token = seal(s)
    fingerprint = token_fingerprint(token)
    assert len(fingerprint) == 12
    assert fingerprint not in token
    assert token_fingerprint(None) != fingerprint
