"""Run a stdio MCP server and record both directions of its traffic, byte for byte.

Usage (as the server command a real client spawns)::

    python tests/support/stdio_tee.py SERVER_OUT CLIENT_IN -- mcphost serve --stdio

Everything read on our stdin is appended to ``CLIENT_IN`` and forwarded to the child's stdin;
everything the child writes to its stdout is appended to ``SERVER_OUT`` and forwarded to our
stdout. Both copies are written line by line and flushed at once, so the files are complete
even when the client kills us. The child's stderr is inherited. When our stdin reaches EOF the
child's stdin is closed; we exit with the child's exit code once it has exited and its stdout
has been drained. SIGTERM/SIGINT are forwarded to the child.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from typing import BinaryIO


def _pump(source: BinaryIO, record: BinaryIO, peer: BinaryIO, *, close_peer: bool) -> None:
    """Copy ``source`` to ``record`` and ``peer`` line by line until EOF.

    The record always gets every line; once ``peer`` fails (it went away) it is skipped, so the
    other side keeps being drained and never blocks on a full pipe.
    """
    peer_alive = True
    try:
        for line in iter(source.readline, b""):
            record.write(line)
            record.flush()
            if peer_alive:
                try:
                    peer.write(line)
                    peer.flush()
                except (OSError, ValueError):
                    peer_alive = False
    except (OSError, ValueError):
        pass
    finally:
        if close_peer:
            try:
                peer.close()
            except (OSError, ValueError):
                pass


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: stdio_tee.py SERVER_OUT CLIENT_IN -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    server_out_path, client_in_path, command = argv[0], argv[1], argv[3:]
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None

    def forward(signum: int, _frame: object) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)

    with open(server_out_path, "ab") as server_out, open(client_in_path, "ab") as client_in:
        inbound = threading.Thread(target=_pump, args=(sys.stdin.buffer, client_in, child.stdin),
                                   kwargs={"close_peer": True}, daemon=True)
        outbound = threading.Thread(target=_pump, args=(child.stdout, server_out, sys.stdout.buffer),
                                    kwargs={"close_peer": False})
        inbound.start()
        outbound.start()
        code = child.wait()
        outbound.join()
    return code if code >= 0 else 128 - code  # killed by a signal: the shell's convention


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
