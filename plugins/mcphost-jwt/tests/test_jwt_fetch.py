"""The guarded fetcher: which addresses it refuses, that it connects to the address it checked, that
it keeps TLS checks on the real host name, and its size, time and redirect limits. Every request
that is supposed to go out goes to a loopback stub; refused ones are checked to send nothing."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from jwt_support import Idp, start_idp
from mcphost_jwt.fetch import GuardedFetcher, IdentityProviderUnavailable, UnsafeTarget, unsafe_reason


@pytest.mark.parametrize("address", [
    "127.0.0.1", "127.8.9.10", "::1", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "100.64.0.1",
    "100.127.255.254", "0.0.0.0", "::", "224.0.0.1", "255.255.255.255", "192.0.2.1", "198.18.0.1", "fe80::1",
    "fc00::1", "fd12:3456::1", "ff02::1", "::ffff:127.0.0.1", "::ffff:10.1.2.3", "::ffff:169.254.169.254",
    "::127.0.0.1", "2002:7f00:1::", "2002:a00:1::", "2002:808:808::", "2001::1", "64:ff9b::7f00:1",
    "64:ff9b::a00:1", "64:ff9b:1::1", "2001:db8::1",
])
def test_non_public_addresses_are_refused(address):
    assert unsafe_reason(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111",
                                     "::ffff:8.8.8.8", "64:ff9b::808:808"])
def test_public_addresses_pass(address):
    assert unsafe_reason(ipaddress.ip_address(address)) is None


class OfflineFetcher(GuardedFetcher):
    """A fetcher that must refuse before connecting: any attempt to connect fails the test instead of
    sending traffic (these tests name public and private addresses that are never to be contacted)."""

    def _client(self, scheme: str, host: str, port: int):
        raise AssertionError(f"the guard let a connection to {host} through")


def resolver(table: dict[str, list[str]]):
    async def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise OSError(f"unknown host {host}")
        return table[host]
    return resolve


@pytest.mark.parametrize("where", ["https://127.0.0.1:{port}/jwks", "https://localhost:{port}/jwks",
                                   "https://[::ffff:127.0.0.1]:{port}/jwks", "https://127.1:{port}/jwks",
                                   "https://2130706433:{port}/jwks", "https://[::1]:{port}/jwks"])
async def test_loopback_targets_are_refused_before_anything_is_sent(idp: Idp, where):
    port = idp.url.rsplit(":", 1)[1]
    fetcher = OfflineFetcher()
    with pytest.raises(UnsafeTarget):
        await fetcher.request("GET", where.format(port=port))
    await fetcher.aclose()
    assert idp.seen == []


async def test_plain_http_is_refused_without_allow_insecure(idp: Idp):
    fetcher = OfflineFetcher(resolver=resolver({"idp.test": ["8.8.8.8"]}))
    with pytest.raises(UnsafeTarget, match="plain http"):
        await fetcher.request("GET", "http://idp.test/jwks")
    with pytest.raises(UnsafeTarget, match="plain http"):
        await fetcher.request("GET", idp.url + "/jwks")
    with pytest.raises(UnsafeTarget):
        await fetcher.request("GET", "file:///etc/passwd")
    assert idp.seen == []


async def test_every_resolved_address_is_checked():
    """One private address among public ones is enough to refuse (no picking the nice one)."""
    fetcher = OfflineFetcher(resolver=resolver({"idp.test": ["93.184.216.34", "10.0.0.7"],
                                                "six.test": ["2606:4700::1", "::ffff:192.168.0.1"]}))
    with pytest.raises(UnsafeTarget, match=r"10\.0\.0\.7"):
        await fetcher.request("GET", "https://idp.test/jwks")
    with pytest.raises(UnsafeTarget, match="::ffff:c0a8:1, a private or reserved address"):
        await fetcher.request("GET", "https://six.test/jwks")
    with pytest.raises(IdentityProviderUnavailable, match="cannot resolve"):
        await fetcher.request("GET", "https://unknown.test/jwks")


async def test_the_connection_goes_to_the_address_that_was_checked(idp: Idp):
    """The name is resolved once, by the guard; the request carries the name only in Host."""
    idp.serve_json("/jwks", {"keys": []})
    port = int(idp.url.rsplit(":", 1)[1])
    fetcher = GuardedFetcher(allow_insecure=True, resolver=resolver({"idp.test": ["127.0.0.1"]}))
    answer = await fetcher.request("GET", f"http://idp.test:{port}/jwks")
    await fetcher.aclose()
    assert answer.status == 200 and answer.body == b'{"keys": []}'
    [seen] = idp.seen
    assert seen.headers["host"] == f"idp.test:{port}"


async def test_redirects_are_not_followed(idp: Idp):
    idp.routes["/jwks"] = lambda seen: (302, {"location": "http://169.254.169.254/latest/meta-data"}, b"")
    fetcher = GuardedFetcher(allow_insecure=True)
    with pytest.raises(IdentityProviderUnavailable, match="redirect"):
        await fetcher.request("GET", idp.url + "/jwks")
    await fetcher.aclose()
    assert len(idp.seen) == 1


@pytest.mark.parametrize("declared", [True, False])
async def test_answers_over_the_size_limit_are_refused(idp: Idp, declared):
    body = b"x" * 70_000
    headers = {} if declared else {"transfer-encoding": "chunked"}
    if declared:
        idp.routes["/big"] = lambda seen: (200, headers, body)
    else:
        chunk = b"%x\r\n%s\r\n" % (len(body), body)
        idp.routes["/big"] = lambda seen: (200, headers, chunk + b"0\r\n\r\n")
    fetcher = GuardedFetcher(allow_insecure=True, max_bytes=64 * 1024)
    with pytest.raises(IdentityProviderUnavailable, match="limit"):
        await fetcher.request("GET", idp.url + "/big")
    await fetcher.aclose()


async def test_compressed_answers_are_refused(idp: Idp):
    idp.routes["/jwks"] = lambda seen: (200, {"content-encoding": "gzip"}, b"\x1f\x8b")
    fetcher = GuardedFetcher(allow_insecure=True)
    with pytest.raises(IdentityProviderUnavailable, match="compressed"):
        await fetcher.request("GET", idp.url + "/jwks")
    assert idp.seen[0].headers["accept-encoding"] == "identity"
    await fetcher.aclose()


# -- HTTPS with the checked address and the real name -------------------------------------------------

def _certificates(tmp_path: Path, name: str) -> tuple[Path, ssl.SSLContext]:
    """A CA (written to a PEM file) and a server context whose certificate, from that CA, is for ``name``."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mcphost-jwt test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(hours=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    ca_file = tmp_path / "ca.pem"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    chain = tmp_path / "server.pem"
    chain.write_bytes(cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(chain)
    return ca_file, context


async def test_https_to_the_checked_address_verifies_the_certificate_for_the_host_name(tmp_path):
    ca_file, context = _certificates(tmp_path, "idp.test")
    stub, server = start_idp(context)
    try:
        stub.serve_json("/jwks", {"keys": []})
        port = int(stub.url.rsplit(":", 1)[1])
        # allow_insecure only because the stub is on loopback; TLS is checked in full.
        table = resolver({"idp.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})
        fetcher = GuardedFetcher(allow_insecure=True, ca_file=str(ca_file), resolver=table)
        answer = await fetcher.request("GET", f"https://idp.test:{port}/jwks")
        assert answer.status == 200 and stub.seen[-1].headers["host"] == f"idp.test:{port}"
        # Same address, another name: the certificate does not match, nothing is read.
        with pytest.raises(IdentityProviderUnavailable):
            await fetcher.request("GET", f"https://other.test:{port}/jwks")
        await fetcher.aclose()
        # A CA the fetcher does not trust.
        untrusted = GuardedFetcher(allow_insecure=True, resolver=table)
        with pytest.raises(IdentityProviderUnavailable):
            await untrusted.request("GET", f"https://idp.test:{port}/jwks")
        await untrusted.aclose()
        assert len(stub.seen) == 1
    finally:
        server.shutdown()
        server.server_close()
