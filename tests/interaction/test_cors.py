"""CORS for ``/mcp`` and ``/mcp/NAME``: the origins ``[server] allowed_origins`` names get their
preflight answered and ``Mcp-Session-Id`` / ``MCP-Protocol-Version`` exposed; any other origin gets
no CORS header. Real HTTP over loopback (the server in this process), and a real browser: a page
served from an allowed origin calls ``/mcp`` from headless Chromium (driven by Playwright)."""

from __future__ import annotations

import contextlib
import http.server
import shutil
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import mcphost_demo
import pytest

from mcphost.testing import app_client, free_port, make_host, serve_http
from tests.support.http_support import ACCEPT_BOTH, INITIALIZE

FOREIGN = "http://evil.example"


def config(allowed: str) -> dict[str, Any]:
    """Settings naming ``allowed`` as the one origin a page may call from, with an endpoint view."""
    return {"server": {"allowed_origins": [allowed], "log_level": "warning"},
            "endpoints": {"narrow": {"path": "/mcp/narrow"}}}


def cors_headers(response: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.startswith("access-control-")}


@pytest.mark.parametrize("path", ["/mcp", "/mcp/narrow"])
async def test_an_allowed_origin_gets_its_preflight_and_exposed_headers_and_no_other_does(path: str) -> None:
    allowed = "https://app.example"
    host = make_host(mcphost_demo, config=config(allowed))
    async with app_client(host) as client:
        url = path
        asked = {"access-control-request-method": "POST",
                 "access-control-request-headers": "content-type, mcp-session-id, mcp-protocol-version"}
        preflight = await client.options(url, headers={"origin": allowed, **asked})
        assert preflight.status_code == 204, preflight.text
        assert preflight.headers["access-control-allow-origin"] == allowed
        assert "POST" in preflight.headers["access-control-allow-methods"]
        assert "mcp-session-id" in preflight.headers["access-control-allow-headers"]

        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE}
        answer = await client.post(url, json=init, headers={"origin": allowed, "accept": ACCEPT_BOTH})
        assert answer.status_code == 200
        assert answer.headers["access-control-allow-origin"] == allowed
        exposed = answer.headers["access-control-expose-headers"].lower()
        assert "mcp-session-id" in exposed and "mcp-protocol-version" in exposed
        # An error answer carries them too (the page must be able to read why).
        bad = await client.post(url, content=b"not json", headers={
            "origin": allowed, "accept": ACCEPT_BOTH, "content-type": "application/json"})
        assert bad.status_code == 400 and bad.headers["access-control-allow-origin"] == allowed

        # A foreign origin: refused, and no CORS header anywhere.
        foreign = [await client.options(url, headers={"origin": FOREIGN, **asked}),
                   await client.post(url, json=init, headers={"origin": FOREIGN, "accept": ACCEPT_BOTH})]
        for response in foreign:
            assert response.status_code == 403 and not cors_headers(response), response.headers
        # No Origin (not a browser): nothing about CORS either.
        plain = await client.post(url, json=init, headers={"accept": ACCEPT_BOTH})
        assert plain.status_code == 200 and not cors_headers(plain)


PAGE = """<!doctype html><title>cors</title><script>
async function call(url, body, session) {
  const headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"};
  if (session) { headers["mcp-session-id"] = session; headers["mcp-protocol-version"] = "2025-11-25"; }
  const response = await fetch(url, {method: "POST", headers, body: JSON.stringify(body)});
  return {status: response.status, session: response.headers.get("mcp-session-id"),
          version: response.headers.get("mcp-protocol-version"), text: await response.text()};
}
window.mcp = async function (url) {
  const init = await call(url, {jsonrpc: "2.0", id: 1, method: "initialize", params: {
    protocolVersion: "2025-11-25", capabilities: {}, clientInfo: {name: "page", version: "1"}}});
  await call(url, {jsonrpc: "2.0", method: "notifications/initialized"}, init.session);
  const tools = await call(url, {jsonrpc: "2.0", id: 2, method: "tools/list"}, init.session);
  return {init, tools};
};
</script>"""


@contextlib.contextmanager
def page_server(port: int) -> Iterator[str]:
    """A static page on ``http://127.0.0.1:port`` (another origin than the MCP server's)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = PAGE.encode()
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.shutdown()
        server.server_close()


async def test_a_page_on_an_allowed_origin_calls_mcp_from_chromium() -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no system chromium (scripts/ensure-tools installs Debian's)")
    from playwright.async_api import async_playwright

    page_port, foreign_port = free_port(), free_port()
    host = make_host(mcphost_demo, config=config(f"http://127.0.0.1:{page_port}"))
    async with serve_http(host) as server, async_playwright() as playwright:
        # --no-sandbox: the tests run as root in CI, where Chromium's sandbox refuses to start.
        browser = await playwright.chromium.launch(executable_path=chromium, headless=True,
                                                   args=["--no-sandbox", "--disable-gpu"])
        try:
            with page_server(page_port) as allowed_page, page_server(foreign_port) as foreign_page:
                page = await browser.new_page()
                await page.goto(allowed_page)
                result = await page.evaluate("url => window.mcp(url)", server.url)
                assert result["init"]["status"] == 200 and result["init"]["session"], result
                assert result["tools"]["status"] == 200 and '"echo"' in result["tools"]["text"], result
                # The same page on an origin not in allowed_origins: the browser gets nothing.
                other = await browser.new_page()
                await other.goto(foreign_page)
                with pytest.raises(Exception, match="Failed to fetch"):
                    await other.evaluate("url => window.mcp(url)", server.url)
        finally:
            await browser.close()
