"""Tools written for FastMCP (the official SDK's ``MCPServer``), exactly as its authors write them.

Nothing here knows about mcphost: the module builds its own ``MCPServer`` and decorates with
``@mcp.tool()``, takes a ``Context`` by annotation, describes parameters with pydantic's ``Field``
(in ``Annotated`` and as a default) and returns a pydantic model. ``tests/support/http_plugins/authoring.py``
hands these same functions to mcphost, and ``tests/interop/test_http_authoring.py`` checks that mcphost
serves them as the SDK would, to the SDK's own client in both protocol eras.
"""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field

mcp = MCPServer("weather")


class DayForecast(BaseModel):
    day: int
    summary: str
    high: float


class Forecast(BaseModel):
    """A forecast for one city."""

    city: str
    units: Literal["metric", "imperial"]
    days: list[DayForecast]


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool()
async def forecast(
    city: Annotated[str, Field(description="City name", min_length=1)],
    days: Annotated[int, Field(ge=1, le=7, description="How many days")] = 3,
    units: Literal["metric", "imperial"] = "metric",
) -> Forecast:
    """Forecast the weather for a city."""
    return Forecast(city=city, units=units,
                    days=[DayForecast(day=n + 1, summary="sunny", high=20.0 + n) for n in range(days)])


@mcp.tool()
def search(
    query: str = Field(description="Text to look for"),
    limit: int = Field(default=2, ge=1, le=10, description="At most this many hits"),
) -> list[str]:
    """Search a tiny catalogue."""
    catalogue = ["apple pie", "apple tart", "apple juice", "pear tart"]
    return [item for item in catalogue if query in item][:limit]


@mcp.tool()
async def count_down(start: int, ctx: Context) -> str:
    """Count down from start, reporting progress and logging at the end."""
    for step in range(start):
        await ctx.report_progress(step + 1, start, f"step {step + 1}")
    await ctx.info(f"counted down from {start}", logger_name="countdown")
    return f"liftoff after {start}"


@mcp.tool()
def sync_shout(text: str, times: int = 1) -> str:
    """A synchronous tool."""
    return " ".join([text.upper()] * times)
