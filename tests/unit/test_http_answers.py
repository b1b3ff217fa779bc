"""http.ANSWERS: the one table that turns what ends an HTTP request into its answer.

It is looked up by the exception's class and then its base classes (as Starlette looks up its
exception handlers), so a plugin's own subclass of a refusal gets the refusal's answer, and an
exception the table does not name is not swallowed.
"""

from __future__ import annotations

import pytest

from mcphost.errors import Forbidden, InsufficientScope, Refused, Unauthorized
from mcphost.protocol.errors import INVALID_PARAMS, SERVER_BUSY
from mcphost.protocol.modern import ModernError
from mcphost.sessions.backend import BackendUnavailable
from mcphost.sessions.manager import TooManySessions
from mcphost.transports import http
from mcphost.transports.asgi import HttpError


class PluginsOwnRefusal(Forbidden):
    """A refusal class a plugin defines for itself."""


@pytest.mark.parametrize(("exc", "named"), [
    (HttpError(400, "bad"), HttpError),
    (Forbidden("no"), Refused),
    (Unauthorized("who?"), Refused),
    (InsufficientScope(("admin",)), Refused),
    (PluginsOwnRefusal("mine"), Refused),
    (ModernError(INVALID_PARAMS, "bad meta"), ModernError),
    (TooManySessions(cap=3), TooManySessions),
    (BackendUnavailable("redis is away"), BackendUnavailable),
])
def test_each_exception_is_answered_by_its_nearest_class_in_the_table(exc: Exception, named: type) -> None:
    assert isinstance(exc, http.ANSWERED)
    assert http._answer_for(exc) is http.ANSWERS[named]


def test_an_exception_the_table_does_not_name_propagates() -> None:
    failure = RuntimeError("a bug")
    assert not isinstance(failure, http.ANSWERED)
    with pytest.raises(RuntimeError, match="a bug"):
        http._answer_for(failure)


@pytest.mark.parametrize(("per_principal", "status"), [(True, 429), (False, 503)])
def test_a_session_cap_is_429_for_the_callers_own_and_503_for_everyones(per_principal: bool, status: int) -> None:
    error = http.ANSWERS[TooManySessions](None, TooManySessions(per_principal=per_principal, cap=2), {}, None)  # type: ignore[arg-type]
    assert error.status == status
    assert error.headers == {"retry-after": "5"}
    assert error.body["error"]["code"] == SERVER_BUSY


def test_an_invalid_2026_request_keeps_its_status_and_data() -> None:
    call = http._Call({})
    call.refusal_id = 7
    error = http.ANSWERS[ModernError](None, ModernError(INVALID_PARAMS, "bad", {"why": "x"}, status=404), {}, call)  # type: ignore[arg-type]
    assert error.status == 404
    assert error.body == {"jsonrpc": "2.0", "id": 7, "error": {"code": INVALID_PARAMS, "message": "bad",
                                                                 "data": {"why": "x"}}}
