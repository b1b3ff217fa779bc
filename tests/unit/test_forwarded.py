"""J7: who a request comes from behind proxies (``mcphost.forwarded``): RFC 7239 ``Forwarded``
first, then ``X-Forwarded-For``, believed only from ``forwarded_allow_ips``; every other request
is keyed by its socket address."""

from __future__ import annotations

import pytest

from mcphost.forwarded import TrustedProxies, forwarded_for, forwarded_hops, is_loopback, relayed


@pytest.mark.parametrize(("value", "hops"), [
    ("for=192.0.2.60;proto=http;by=203.0.113.43", ["192.0.2.60"]),
    ('for="_gazonk"', ["_gazonk"]),
    ('For="[2001:db8:cafe::17]:4711"', ["[2001:db8:cafe::17]:4711"]),
    ("for=192.0.2.43, for=198.51.100.17", ["192.0.2.43", "198.51.100.17"]),
    ('for="a,b;c", for=10.0.0.1', ["a,b;c", "10.0.0.1"]),  # separators inside quotes are text
    ('for="x\\"y"', ['x"y']),
    ("proto=https;host=example.com", []),
    ("", []),
    ("for=", []),
])
def test_forwarded_is_parsed_as_rfc_7239_says(value: str, hops: list[str]) -> None:
    assert forwarded_for(value) == hops


def test_forwarded_comes_before_x_forwarded_for() -> None:
    both = {"forwarded": "for=198.51.100.1", "x-forwarded-for": "192.0.2.99"}
    assert forwarded_hops(both) == ["198.51.100.1"]
    # A Forwarded that names no one leaves X-Forwarded-For to answer.
    assert forwarded_hops({"forwarded": "proto=https", "x-forwarded-for": "192.0.2.99, 10.0.0.2"}) == [
        "192.0.2.99", "10.0.0.2"]


def test_only_a_trusted_proxy_is_believed() -> None:
    proxies = TrustedProxies(["10.0.0.0/8"])
    # The proxy writes only Forwarded; the client sent its own X-Forwarded-For to pick its quota key.
    headers = {"forwarded": "for=198.51.100.7", "x-forwarded-for": "192.0.2.1"}
    assert proxies.client("10.0.0.5", 443, headers) == "198.51.100.7:0"
    # The same headers from a peer that is no trusted proxy: its socket address counts.
    assert proxies.client("203.0.113.5", 5555, headers) == "203.0.113.5:5555"
    assert TrustedProxies([]).client("10.0.0.5", 443, headers) == "10.0.0.5:443"


def test_hops_are_read_from_the_right_skipping_trusted_proxies() -> None:
    proxies = TrustedProxies(["10.0.0.0/8"])
    # The client claimed 192.0.2.1; the outer proxy (10.0.0.9) appended what it saw.
    headers = {"forwarded": 'for=192.0.2.1, for="198.51.100.8:1234", for=10.0.0.9'}
    assert proxies.client("10.0.0.5", 443, headers) == "198.51.100.8:0"
    v6 = {"forwarded": 'for="[2001:db8::1]:80"'}
    assert proxies.client("10.0.0.5", 443, v6) == "[2001:db8::1]:0"
    assert TrustedProxies(["*"]).client("203.0.113.5", 1, {"x-forwarded-for": "192.0.2.4"}) == "192.0.2.4:0"
    # Every hop a trusted proxy: the farthest one.
    assert proxies.client("10.0.0.5", 443, {"x-forwarded-for": "10.0.0.1, 10.0.0.2"}) == "10.0.0.1:0"


def test_relayed_and_loopback() -> None:
    assert relayed({"x-real-ip": "1.2.3.4"}) and relayed({"forwarded": ""}) and not relayed({"host": "x"})
    assert is_loopback("127.0.0.1") and is_loopback("127.0.0.1:80") and is_loopback("[::1]:0")
    assert is_loopback("::1") and not is_loopback("203.0.113.9:0") and not is_loopback(None)
    assert not is_loopback("_hidden:0")
