import os

import mcphost

TOKENS = {os.environ.get("DEMO_TOKEN", "s3cret"): "alice"}


@mcphost.hookimpl
def mcphost_authenticate(request):
    token = mcphost.bearer_token(request.headers.get("authorization"))
    if token is None:
        return None  # no credentials: the host answers 401 with a Bearer challenge
    if token not in TOKENS:
        raise mcphost.Unauthorized("Unknown token", error="invalid_token")
    return mcphost.Principal(TOKENS[token], scopes=frozenset({"notes:read"}))


@mcphost.hookimpl
def mcphost_connect(session, request):
    if request.principal is not None and request.principal.subject != "admin":
        session.allowed_tools = {"echo", "shout"}  # everyone else sees only these
