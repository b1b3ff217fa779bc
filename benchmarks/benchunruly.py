"""A misbehaving plugin for bench_isolation.py, and ``mcphost serve`` with it loaded.

    python benchmarks/benchunruly.py serve --host 127.0.0.1 --port 8123

Loaded only by that benchmark (never installed, no entry point). Its tools do what a careless or
hostile plugin does: ``unruly_exit`` calls ``sys.exit(2)`` synchronously (an argparse CLI given
bad arguments), ``unruly_interrupt`` raises ``KeyboardInterrupt`` on the event loop, and
``unruly_block(seconds)`` blocks its thread with ``time.sleep``.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import mcphost


@mcphost.tool
def unruly_exit() -> str:
    sys.exit(2)


@mcphost.tool
async def unruly_interrupt() -> str:
    raise KeyboardInterrupt


@mcphost.tool
def unruly_block(seconds: float = 5.0) -> str:
    time.sleep(seconds)
    return "woke up"


class Unruly:
    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
        return [unruly_exit, unruly_interrupt, unruly_block]


def main() -> None:
    """``mcphost`` on the command line, with this plugin registered next to the installed ones."""
    from mcphost import cli
    from mcphost.host import Host

    original = Host.__init__

    def with_unruly(self: Host, config: Any = None, *, plugins: Any = (), **options: Any) -> None:
        original(self, config, plugins=[*plugins, ("benchunruly", Unruly())], **options)

    Host.__init__ = with_unruly  # type: ignore[method-assign]
    sys.argv[0] = "mcphost"
    cli.main()


if __name__ == "__main__":
    main()
