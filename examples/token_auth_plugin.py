import os

import mcphost

TOKENS = {os.environ.get("DEMO_TOKEN", "s3cret"): "alice"}


@mcphost.hookimpl
def mcphost_connect(session, request):
    token = request.headers.get("authorization", "").removeprefix("Bearer ")
    if request.transport == "stdio":
        return  # a local process is trusted; HTTP clients must present a token
    if token not in TOKENS:
        raise mcphost.Unauthorized("A valid bearer token is required", challenge='Bearer realm="mcphost"')
    session.assigns["user"] = TOKENS[token]
    if TOKENS[token] != "admin":
        session.allowed_tools = {"echo", "shout"}  # everyone else sees only these
