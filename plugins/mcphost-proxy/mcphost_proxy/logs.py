"""An upstream's log messages outside a call: rate-limited, relayed to the sessions that asked for
logs, and summarized in the host's log (never a line per message).

A gate in front of the parser (:meth:`LogRelay.admit`, asked by the stdio reader with the raw
line) drops what is over the rate before it costs a parse, so a flood of log notifications
costs the host little and the upstream's replies behind it arrive within moments.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from mcphost.protocol import jsonrpc

log = logging.getLogger("mcphost.proxy")

#: Log messages a second one upstream may have relayed (a burst of BURST allowed).
RATE = 100.0
BURST = 200
#: Seconds between two summary lines in the host's log.
SUMMARY_EVERY = 10.0
_MARK = b'"notifications/message"'


class LogRelay:
    """One upstream's log messages: a token bucket, a relay to sessions and a summary."""

    def __init__(self, label: str, *, rate: float = RATE, burst: int = BURST) -> None:
        self.label = label
        self.rate = rate
        self.burst = burst
        self._tokens = float(burst)
        self._refilled = time.monotonic()
        self._summarized = time.monotonic()
        self.relayed = 0
        self.dropped = 0
        self._first = True

    def admit(self, line: bytes) -> bool:
        """Whether a raw line may go on to be parsed: False for a log notification over the rate."""
        if _MARK not in line[:200]:
            return True
        now = time.monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._refilled) * self.rate)
        self._refilled = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        self.dropped += 1
        self._summary(now)
        return False

    async def outside_call(self, host: Any, level: str, data: Any, logger: str | None) -> None:
        """Relay one message to every session here that set a log level admitting it."""
        params: dict[str, Any] = {"level": level, "logger": f"{self.label}/{logger}" if logger else self.label,
                                  "data": data}
        note = jsonrpc.notification("notifications/message", params)
        sessions = getattr(getattr(host, "manager", None), "sessions", None) or {}
        for session in list(sessions.values()):
            if (session.log_level is None or not session.initialized or session.outlet is None or session.closed
                    or not session.wants_log(level)):
                continue
            try:
                await session.outlet(note, None)
            except Exception:
                log.debug("could not relay a log message of upstream %s", self.label, exc_info=True)
        self.relayed += 1
        if self._first:
            self._first = False
            log.info("upstream %s logs outside a call (%s): %s; relayed to the sessions that set a log level, "
                     "summarized here every %g s", self.label, level, str(data)[:200], SUMMARY_EVERY)
        self._summary(time.monotonic())

    def _summary(self, now: float) -> None:
        if now - self._summarized < SUMMARY_EVERY or not (self.relayed or self.dropped):
            return
        log.info("upstream %s: %d log messages outside a call relayed in the last %.0f s, %d dropped over "
                 "the rate limit (%g a second)", self.label, self.relayed, now - self._summarized, self.dropped,
                 self.rate)
        self.relayed = self.dropped = 0
        self._summarized = now
