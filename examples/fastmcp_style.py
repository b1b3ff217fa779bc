"""A server written for FastMCP / the official MCP SDK, unchanged: `mcphost dev examples/fastmcp_style.py`.

Nothing here knows about mcphost. The same file runs under the SDK (`python examples/fastmcp_style.py`)
and under mcphost, which serves its tool, resources and prompt as registered here: names, URIs and
descriptions are written once, in the decorators.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

mcp = MCPServer("weather")

FORECASTS = {"paris": "sunny, 21°C", "oslo": "rain, 9°C"}


@mcp.tool()
async def forecast(
    city: Annotated[str, Field(min_length=1, description="City name")],
    ctx: Context,
    days: Annotated[int, Field(ge=1, le=7, description="How many days")] = 1,
) -> str:
    """Forecast the weather for a city."""
    await ctx.info(f"forecast for {city}")
    await ctx.report_progress(1, 1)
    return f"{city}: {FORECASTS.get(city.lower(), 'unknown')} for {days} day(s)"


@mcp.resource("weather://cities", mime_type="text/plain")
def cities() -> str:
    """The cities with a forecast."""
    return "\n".join(sorted(FORECASTS))


@mcp.resource("weather://city/{name}")
def city(name: str) -> str:
    """Today's weather in one city."""
    return FORECASTS.get(name.lower(), "unknown")


@mcp.prompt()
def plan_trip(city: str, days: str = "3") -> str:  # prompt arguments arrive as strings
    """Ask for a trip plan that fits the weather."""
    return f"Plan a {days}-day trip to {city}; check weather://city/{city} first."


if __name__ == "__main__":
    mcp.run("streamable-http")
