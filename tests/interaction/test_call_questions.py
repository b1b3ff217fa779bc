"""``mcphost call`` answers the questions a tool asks: a form typed on a real terminal (a pty), a URL
printed, sampling refused, ``--answer`` for scripts. The tools are the installed demo and
conformance plugins', run by the real console script."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import mcphost
from mcphost.questions import CAPABILITIES, TerminalAnswers, convert
from mcphost.testing import make_host
from mcphost.transports.memory import MemoryTransport

MCPHOST = Path(sys.executable).parent / "mcphost"


def environment(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCPHOST_", "OTEL_"))}
    env.update({"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "MCPHOST_PLUGINS": "demo,conformance"})
    return env


class Terminal:
    """``mcphost call`` with its stdin and stderr on a pseudo-terminal (stdout, the result, on a pipe)."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        self.master, slave = pty.openpty()
        self.process = subprocess.Popen([str(MCPHOST), "call", *args], stdin=slave, stderr=slave,
                                        stdout=subprocess.PIPE, env=environment(tmp_path), close_fds=True,
                                        start_new_session=True)
        os.close(slave)
        self.seen = ""

    def expect(self, text: str, timeout: float = 30) -> None:
        """Read the terminal until ``text`` has appeared (since the last expect)."""
        deadline = time.monotonic() + timeout
        while text not in self.seen:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"{text!r} never appeared; the terminal showed:\n{self.seen}"
            ready, _, _ = select.select([self.master], [], [], remaining)
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:  # the process closed the terminal
                    chunk = b""
                assert chunk, f"{text!r} never appeared; the terminal showed:\n{self.seen}"
                self.seen += chunk.decode(errors="replace")
        self.seen = self.seen[self.seen.index(text) + len(text):]

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\r")

    def wait(self, timeout: float) -> int:
        """The exit status, reading the terminal meanwhile: a process whose output filled the
        terminal's buffer would otherwise block writing it and never exit."""
        deadline = time.monotonic() + timeout
        while self.process.poll() is None:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"still running after {timeout} s; the terminal showed:\n{self.seen}"
            ready, _, _ = select.select([self.master], [], [], min(remaining, 0.1))
            if ready:
                try:
                    self.seen += os.read(self.master, 4096).decode(errors="replace")
                except OSError:  # the process closed the terminal
                    pass
        return self.process.returncode

    def result(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        out = self.process.stdout.read()
        assert self.process.wait(timeout=30) == 0
        os.close(self.master)
        return json.loads(out)  # type: ignore[no-any-return]


def test_a_form_is_answered_field_by_field_on_a_terminal(tmp_path: Path) -> None:
    """Typed fields, defaults taken with Enter, a wrong value asked again, an enum by its number."""
    term = Terminal(tmp_path, "test_elicitation_sep1034_defaults")
    term.expect("Please review and update the form fields with defaults")
    term.expect("name [John Doe]: ")
    term.type("Ada")
    term.expect("age [30]: ")
    term.type("forty")
    term.expect("expected a whole number")
    term.expect("age [30]: ")
    term.type("41")
    term.expect("score [95.5]: ")
    term.type("")  # the default
    term.expect("2. inactive")
    term.expect("status [active]: ")
    term.type("2")
    term.expect("verified [y/n] [yes]: ")
    term.type("n")
    [block] = term.result()["content"]
    answered = json.loads(block["text"].split("content=", 1)[1])
    assert block["text"].startswith("Elicitation completed: action=accept")
    assert answered == {"name": "Ada", "age": 41, "score": 95.5, "status": "inactive", "verified": False}


def test_ctrl_c_at_a_prompt_aborts_at_once_and_prints_no_result(tmp_path: Path) -> None:
    term = Terminal(tmp_path, "greet_user")
    term.expect("Name: ")
    os.killpg(term.process.pid, signal.SIGINT)  # what Ctrl-C on the terminal sends
    assert term.wait(timeout=30) == 1  # a hang would last until the question times out (300 s)
    term.expect("Aborted!")
    assert term.process.stdout is not None and term.process.stdout.read() == b""
    os.close(term.master)


def test_answer_fills_a_form_without_a_terminal(tmp_path: Path) -> None:
    done = subprocess.run([str(MCPHOST), "call", "greet_user", "--answer", "name=Ada"], env=environment(tmp_path),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["content"][0]["text"] == "Hello, Ada!"


def test_without_a_terminal_or_an_answer_the_form_is_declined_and_says_why(tmp_path: Path) -> None:
    done = subprocess.run([str(MCPHOST), "call", "greet_user"], env=environment(tmp_path),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert json.loads(done.stdout)["content"][0]["text"] == "No greeting: the user chose to decline."
    assert "(not a terminal and no --answer name=...: declined)" in done.stderr


def test_sampling_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    done = subprocess.run([str(MCPHOST), "call", "summarize", "--arg", "text=hello"], env=environment(tmp_path),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert json.loads(done.stdout)["content"][0]["text"] == (
        "Sampling is not available: mcphost call has no model to ask")
    assert "mcphost call has no model, so it refused" in done.stderr


def test_roots_are_the_current_directory(tmp_path: Path) -> None:
    done = subprocess.run([str(MCPHOST), "call", "list_roots"], env=environment(tmp_path), cwd=tmp_path,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(json.loads(done.stdout)["content"][0]["text"]) == {"result": [tmp_path.as_uri()]}


@mcphost.tool
async def sign_in(*, ctx: mcphost.Context) -> str:
    """Ask the user to open a page."""
    answer = await ctx.elicit_url("Sign in to the weather service", "https://example.test/login")
    return answer.action


@pytest.mark.parametrize(("answers", "typed", "action"), [
    ({"url": "accept"}, [], "accept"), ({}, ["n"], "decline"), ({}, [""], "accept")])
async def test_a_url_elicitation_is_printed_and_confirmed(answers: dict[str, str], typed: list[str],
                                                          action: str) -> None:
    said: list[str] = []
    lines = iter(typed)
    terminal = TerminalAnswers(answers, interactive=True, ask=lambda prompt: next(lines), say=said.append)
    host = make_host(("signin", type("P", (), {"mcphost_tools": mcphost.hookimpl(lambda self, host: [sign_in])})()))
    async with MemoryTransport(host, capabilities=CAPABILITIES, handlers=terminal.handlers()) as client:
        result = await client.call_tool("sign_in")
    assert result["content"][0]["text"] == action
    assert said == ["Sign in to the weather service\n  https://example.test/login"]


@pytest.mark.parametrize(("field", "text", "value"), [
    ({"type": "string", "oneOf": [{"const": "v1", "title": "First"}, {"const": "v2", "title": "Second"}]},
     "Second", "v2"),
    ({"type": "string", "enum": ["a", "b"], "enumNames": ["Ay", "Bee"]}, "Bee", "b"),
    ({"type": "array", "items": {"anyOf": [{"const": "x", "title": "Ex"}, {"const": "y", "title": "Why"}]}},
     "Ex, 2", ["x", "y"]),
    ({"type": "array", "items": {"type": "string", "enum": ["p", "q"]}}, "q", ["q"]),
    ({"type": "number", "minimum": 0}, "2.5", 2.5),
    ({"type": "boolean"}, "yes", True),
])
def test_answers_are_typed_by_the_schema(field: dict[str, Any], text: str, value: Any) -> None:
    assert convert(field, text) == value
