"""The limits of one program, apart from the sandbox that enforces them: the plugin reads them from
its settings whether or not a program ever runs, and the sandbox (with Monty) is imported only then."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Limits:
    """The limits of one program (``[endpoints.NAME.code]`` over ``[plugins.codemode]``)."""

    time_limit: float
    memory_limit_mb: int
    max_calls: int
    max_output_bytes: int

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Limits:
        return cls(time_limit=float(settings["time_limit"]), memory_limit_mb=int(settings["memory_limit_mb"]),
                   max_calls=int(settings["max_calls"]), max_output_bytes=int(settings["max_output_bytes"]))
