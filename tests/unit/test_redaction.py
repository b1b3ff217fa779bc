"""The one redaction every surface uses (mcphost.redaction): each name and shape rule hides its
secret, wherever it stands in a string, and ordinary values pass unchanged."""

from __future__ import annotations

import logging

import pytest

import mcphost
from mcphost.redaction import REDACTED, RedactingFilter, is_secret_name, looks_random, redact, redact_text

SK = "sk-proj-Q7vL2mN8xB4cR1tY6wE0"
GHP = "ghp_R2d4F6h8J0k2L4m6N8p0Q2s4T6v8X0z2"
GITHUB_PAT = "github_pat_11ABCDE0Q_x8Yz3Wq9Lm2Np5Rs7Tv0"
SLACK = "xoxb-2048-1024-Zq8Xw7Ve6Ut5"
JWT = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLXZhbHVl"
AWS_ID = "AKIAQ3EGUXZ7EXAMPLE2"
RANDOM = "Zk3pQ9xL2mN8vB4cR7tY1wE6uI0oA5sDfG"


@pytest.mark.parametrize(("text", "secret"), [
    ("https://alice:hunter2horse@api.example.com/mcp", "hunter2horse"),
    ("redis://:cachepw77@cache.internal:6379/0", "cachepw77"),
    ("https://api.example.com/mcp?access_token=qtok123&v=2", "qtok123"),
    (f"https://{GHP}@github.com/org/repo.git", GHP),
    ("Authorization: Bearer opaque.token-value", "opaque.token-value"),
    ("Cookie: session=c00kie-jar", "c00kie-jar"),
    ("X-Auth: xauth-value", "xauth-value"),
    ("X-Api-Key: k3y-v4lue", "k3y-v4lue"),
    ("GITHUB_PAT=patvalue OPENAI_KEY=openaival", "patvalue"),
    ("GITHUB_PAT=patvalue OPENAI_KEY=openaival", "openaival"),
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI", "wJalrXUtnFEMI"),
    ("npx server --api-key flagval1 --port 8080", "flagval1"),
    ("npx server --token=flagval2 -v", "flagval2"),
    ('{"client_secret": "cs-value", "name": "x"}', "cs-value"),
    (f"upstream failed: bad key {SK} (401)", SK),
    (f"token {GHP} expired", GHP),
    (f"see {GITHUB_PAT}.", GITHUB_PAT),
    (f"slack {SLACK}", SLACK),
    (f"Authorization header was {JWT}", JWT),
    (f"aws id {AWS_ID} in a message", AWS_ID),
    (f"a generated key {RANDOM} in the middle", RANDOM),
])
def test_each_rule_hides_its_secret_inside_longer_text(text: str, secret: str) -> None:
    shown = redact_text(text)
    assert secret not in shown
    assert REDACTED in shown


@pytest.mark.parametrize("text", [
    "vendor_lookup", "tools/call", "http://localhost:8080/mcp", "https://api.example.com/v1/tools",
    "port 8080", "hello world", "sdk_server.py", "/usr/lib/python3.11/site-packages/mcp/server.py",
    "getUser2FactorAuthenticationStatusForAccount", "3f786850e387550fdab836ed7e6dc881de23001b",
    "550e8400-e29b-41d4-a716-446655440000", "upstream sdk (stdio: running, 3 tools)",
    "python server.py --port 8080 --verbose", "the token was refused", "pass-through mode",
    "redis://cache.internal:6379/0", "https://user@host.example/x",
])
def test_ordinary_values_pass_unchanged(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize(("name", "secret"), [
    ("GITHUB_PAT", True), ("OPENAI_KEY", True), ("Cookie", True), ("X-Auth", True), ("Authorization", True),
    ("AWS_SECRET_ACCESS_KEY", True), ("client_secret", True), ("api-key", True), ("accessToken", True),
    ("XApiKey", True), ("session_id", True), ("private_key", True), ("db_password", True),
    ("credentials", True), ("state_keys", True),
    ("path", False), ("name", False), ("port", False), ("max_sessions", False), ("token_url", False),
    ("key_prefix", False), ("session_idle_timeout", False), ("passthrough", False), ("author", False),
    ("command", False), ("url", False),
])
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_random_shape_needs_length_mixed_classes_and_spread() -> None:
    assert looks_random(RANDOM)
    assert not looks_random(RANDOM[:20])  # too short
    assert not looks_random("a" * 40)
    assert not looks_random("getUser2FactorAuthenticationStatusForAccount")  # an identifier's spread


def test_structured_settings() -> None:
    shown = redact({
        "server": {"state_keys": ["k1"], "max_sessions": 5, "session_idle_timeout": 30, "port": 8000},
        "plugins": {
            "proxy": {"servers": {"sdk": {
                "command": "python", "args": ["server.py", "--api-key", "argval", "--token=tokval", "--port", "80"],
                "env": {"PLAIN_NAME": "envval", "GITHUB_PAT": "patval"},
                "headers": {"Accept": "hdrval"},
                "url": "https://u:pw@h.example/mcp?key=qv",
            }}},
            "jwt": {"client_secret": "cs", "issuer": "https://id.example", "token_url": "https://id.example/t"},
        },
    })
    assert shown == {
        "server": {"state_keys": REDACTED, "max_sessions": 5, "session_idle_timeout": 30, "port": 8000},
        "plugins": {
            "proxy": {"servers": {"sdk": {
                "command": "python", "args": ["server.py", "--api-key", REDACTED, f"--token={REDACTED}", "--port",
                                              "80"],
                "env": {"PLAIN_NAME": REDACTED, "GITHUB_PAT": REDACTED},  # every env and header value
                "headers": {"Accept": REDACTED},
                "url": f"https://u:{REDACTED}@h.example/mcp?key={REDACTED}",
            }}},
            "jwt": {"client_secret": REDACTED, "issuer": "https://id.example", "token_url": "https://id.example/t"},
        },
    }


def test_exported_for_plugins() -> None:
    assert mcphost.redact is redact and mcphost.redact_text is redact_text and mcphost.REDACTED == REDACTED


def test_the_log_filter_redacts_message_arguments_and_tracebacks() -> None:
    record = logging.LogRecord("mcphost.proxy", logging.WARNING, __file__, 1, "upstream %s: %s", ("remote",
                               "https://a:pw1234@h.example/mcp?token=t0k"), None)
    try:
        raise ConnectionError(f"cannot reach {SK}")
    except ConnectionError:
        import sys
        record.exc_info = sys.exc_info()
    assert RedactingFilter().filter(record)
    formatted = logging.Formatter().format(record)
    assert "pw1234" not in formatted and "t0k" not in formatted and SK not in formatted
    assert "upstream remote: https://a:[redacted]@h.example/mcp?token=[redacted]" in formatted


def test_a_config_error_never_quotes_a_secret() -> None:
    from mcphost.config import _schema_problems
    schema = {"type": "object", "properties": {"client_secret": {"type": "string", "pattern": "^cs-"},
                                               "url": {"type": "string", "pattern": "^redis://[a-z]"}}}
    problems = _schema_problems("f.toml", "plugins.x", schema,
                                {"client_secret": "hunter2hunter2", "url": "Redis://:pw9999@cache:6379"})
    assert len(problems) == 2
    text = "\n".join(problems)
    assert "hunter2hunter2" not in text and "pw9999" not in text and REDACTED in text
    assert "plugins.x.client_secret" in text and "does not match" in text  # still says what is wrong


@pytest.mark.parametrize("unit", ["a.", "-a", "a:", "a=", "a://", '"a', "abc "])
def test_cost_is_linear_in_the_text(unit: str) -> None:
    import gc
    import time

    def cost(repeat: int) -> float:
        text = unit * repeat
        started = time.thread_time()  # this thread's CPU time: a busy machine's waits do not count
        redact_text(text)
        return time.thread_time() - started

    # The least CPU time of several runs at each size, at sizes where a run takes milliseconds, and
    # no collection in between: 10x the text; quadratic would be 100x.
    gc.disable()
    try:
        small, large = min(cost(20_000) for _ in range(5)), min(cost(200_000) for _ in range(5))
    finally:
        gc.enable()
    assert large < 30 * max(small, 1e-3)
