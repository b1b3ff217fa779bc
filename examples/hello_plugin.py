import mcphost


@mcphost.tool(annotations={"readOnlyHint": True})
async def shout(text: str, times: int = 1, *, ctx: mcphost.Context) -> str:
    """Repeat the text in capitals."""
    await ctx.progress(1, total=1)
    return " ".join([text.upper()] * times)


@mcphost.hookimpl
def mcphost_tools(host):
    return [shout]
