"""``httpauth``: a toy authentication plugin for HTTP tests (never use anything like it for real).

``X-Test-User: alice`` becomes ``Principal(subject="alice")``; ``X-Test-Issuer`` and
``X-Test-Client`` set the issuer and client id. Without ``X-Test-User`` the hook has no
opinion: servers that let such requests through as anonymous set ``[server] allow_anonymous``, so
sessions can be tried across principals and anonymity.
"""

from __future__ import annotations

import mcphost


@mcphost.hookimpl
def mcphost_authenticate(request):
    user = request.headers.get("x-test-user")
    if not user:
        return None
    return mcphost.Principal(subject=user, issuer=request.headers.get("x-test-issuer"),
                             client_id=request.headers.get("x-test-client"))
