"""Answers to the questions a tool asks its client, for ``mcphost call``: whoever runs it is the client.

A form elicitation is asked field by field on the terminal (typed, with the schema's defaults, enums
as choices, required fields insisted on) unless ``--answer KEY=VALUE`` already gave the value; a URL
elicitation is printed with its URL and confirmed; sampling is refused with a message saying why
(there is no model here); roots are the current directory. Without a terminal, only ``--answer``
values are used: a form missing a required one is declined, and the reason is printed.

Questions and prompts go to stderr, so stdout carries only the tool's result.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click

from mcphost.protocol.errors import INVALID_REQUEST, McpError

#: The capabilities ``mcphost call`` declares: it answers every kind of question (sampling with a refusal).
CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}


class AnswerError(ValueError):
    """A value that does not fit the field it answers."""


def parse_answers(pairs: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``KEY=VALUE`` pairs as given on the command line (typed later, against the form's schema)."""
    answers: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r}: expected KEY=VALUE", param_hint="--answer")
        answers[key] = value
    return answers


def choices(field: Mapping[str, Any]) -> list[tuple[str, str]] | None:
    """(value, label) of a single-select field: ``enum`` (with legacy ``enumNames``) or ``oneOf`` consts."""
    if isinstance(field.get("enum"), list):
        names = field.get("enumNames")
        labels = names if isinstance(names, list) and len(names) == len(field["enum"]) else field["enum"]
        return [(str(v), str(label)) for v, label in zip(field["enum"], labels, strict=True)]
    options = field.get("oneOf") or field.get("anyOf")
    if isinstance(options, list) and options and all(isinstance(o, dict) and "const" in o for o in options):
        return [(str(o["const"]), str(o.get("title", o["const"]))) for o in options]
    return None


def multi_choices(field: Mapping[str, Any]) -> list[tuple[str, str]] | None:
    """(value, label) of a multi-select field: an array whose items are an enum or titled consts."""
    items = field.get("items")
    return choices(items) if field.get("type") == "array" and isinstance(items, dict) else None


def convert(field: Mapping[str, Any], text: str) -> Any:
    """``text`` as the value of ``field`` (typed by the schema); AnswerError when it does not fit."""
    kind = field.get("type")
    options = multi_choices(field)
    if options is not None:
        picked = [part.strip() for part in text.split(",") if part.strip()]
        values = [_pick(options, part) for part in picked]
        low, high = field.get("minItems"), field.get("maxItems")
        if (isinstance(low, int) and len(values) < low) or (isinstance(high, int) and len(values) > high):
            raise AnswerError(f"choose {low if low is not None else 0} to {high if high is not None else 'any'} "
                              "options")
        return values
    options = choices(field)
    if options is not None:
        return _pick(options, text.strip())
    if kind == "boolean":
        lowered = text.strip().lower()
        if lowered in ("y", "yes", "true", "1", "on"):
            return True
        if lowered in ("n", "no", "false", "0", "off"):
            return False
        raise AnswerError("answer yes or no")
    if kind in ("integer", "number"):
        try:
            number: float | int = int(text) if kind == "integer" else float(text)
        except ValueError:
            raise AnswerError(f"expected {'a whole number' if kind == 'integer' else 'a number'}") from None
        low, high = field.get("minimum"), field.get("maximum")
        if (isinstance(low, int | float) and number < low) or (isinstance(high, int | float) and number > high):
            raise AnswerError(f"expected a number from {low if low is not None else '-∞'} to "
                              f"{high if high is not None else '∞'}")
        return number
    low, high = field.get("minLength"), field.get("maxLength")
    if isinstance(low, int) and len(text) < low:
        raise AnswerError(f"at least {low} character{'s' if low != 1 else ''}")
    if isinstance(high, int) and len(text) > high:
        raise AnswerError(f"at most {high} characters")
    return text


def _pick(options: list[tuple[str, str]], text: str) -> str:
    for value, label in options:
        if text in (value, label):
            return value
    if text.isdigit() and 1 <= int(text) <= len(options):  # the number shown next to it
        return options[int(text) - 1][0]
    raise AnswerError(f"choose one of: {', '.join(value for value, _ in options)}")


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


class TerminalAnswers:
    """Answers server-to-client requests for one ``mcphost call``.

    ``answers``: the ``--answer`` values; ``interactive``: whether to ask on the terminal for the
    rest (stdin is a terminal); ``ask``: reads one line after showing a prompt (tests pass their own).
    """

    def __init__(self, answers: Mapping[str, str] | None = None, *, interactive: bool | None = None,
                 ask: Callable[[str], str] | None = None, say: Callable[[str], None] | None = None) -> None:
        self.answers = dict(answers or {})
        self.interactive = sys.stdin.isatty() if interactive is None else interactive
        self._ask = ask or _read_line
        self._say = say or (lambda text: click.echo(text, err=True))

    def handlers(self) -> dict[str, Callable[[dict[str, Any]], Any]]:
        """Handlers by method, for the in-memory transport."""
        return {"elicitation/create": self.elicit, "sampling/createMessage": self.sample, "roots/list": self.roots}

    async def elicit(self, params: dict[str, Any]) -> dict[str, Any]:
        return await _in_daemon_thread(self._url if params.get("mode") == "url" else self._form, params)

    async def sample(self, params: dict[str, Any]) -> dict[str, Any]:
        self._say("The tool asked for sampling (a completion from the client's model); mcphost call has no "
                  "model, so it refused. Call this tool from an MCP client that has one.")
        raise McpError(INVALID_REQUEST, "Sampling is not available: mcphost call has no model to ask")

    async def roots(self, params: dict[str, Any]) -> dict[str, Any]:
        cwd = Path.cwd()
        return {"roots": [{"uri": cwd.as_uri(), "name": cwd.name or str(cwd)}]}

    # -- URL mode --------------------------------------------------------------------------------

    def _url(self, params: dict[str, Any]) -> dict[str, Any]:
        self._say(f"{params.get('message', 'The tool asks you to open a page')}\n  {params.get('url', '')}")
        given = self.answers.get("url")
        if given is not None:
            action = given if given in ("accept", "decline", "cancel") else "accept"
        elif not self.interactive:
            self._say("(not a terminal, no --answer url=accept: declined)")
            action = "decline"
        else:
            reply = self._ask("Open it and continue? [Y/n]: ").strip().lower()
            action = "decline" if reply in ("n", "no") else "accept"
        return {"action": action}

    # -- form mode -------------------------------------------------------------------------------

    def _form(self, params: dict[str, Any]) -> dict[str, Any]:
        schema = params.get("requestedSchema") or {}
        fields: dict[str, Any] = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        self._say(str(params.get("message", "The tool asks:")))
        content: dict[str, Any] = {}
        for name, field in fields.items():
            if not isinstance(field, dict):
                continue
            if name in self.answers:
                try:
                    content[name] = convert(field, self.answers[name])
                    continue
                except AnswerError as exc:
                    if not self.interactive:
                        self._say(f"--answer {name}: {exc}; declined")
                        return {"action": "decline"}
                    self._say(f"--answer {name}: {exc}")
            if not self.interactive:
                if "default" in field:
                    content[name] = field["default"]
                elif name in required:
                    self._say(f"(not a terminal and no --answer {name}=...: declined)")
                    return {"action": "decline"}
                continue
            try:
                value = self._field(name, field, name in required)
            except EOFError:  # Ctrl-D: the user walked away from the form
                self._say("")
                return {"action": "cancel"}
            if value is not None:
                content[name] = value
        return {"action": "accept", "content": content}

    def _field(self, name: str, field: Mapping[str, Any], required: bool) -> Any:
        label = str(field.get("title") or name)
        if field.get("description"):
            label += f" ({field['description']})"
        options = multi_choices(field) or choices(field)
        if options is not None:
            for number, (value, title) in enumerate(options, 1):
                self._say(f"  {number}. {title}" + (f" [{value}]" if title != value else ""))
            if multi_choices(field) is not None:
                label += ", comma-separated"
        elif field.get("type") == "boolean":
            label += " [y/n]"
        default = field.get("default")
        shown = f" [{_shown(default)}]" if default is not None else ("" if required else " (optional)")
        while True:
            text = self._ask(f"{label}{shown}: ")
            if text == "":
                if default is not None:
                    return default
                if not required:
                    return None
                self._say("  a value is required")
                continue
            try:
                return convert(field, text)
            except AnswerError as exc:
                self._say(f"  {exc}")


async def _in_daemon_thread(fn: Callable[[dict[str, Any]], dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
    """``fn(params)`` in a daemon thread: one blocked reading the terminal must not keep the process
    alive after Ctrl-C (``asyncio.to_thread``'s executor is joined when the loop closes)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[dict[str, Any]] = loop.create_future()

    def settle(value: dict[str, Any] | None, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            assert value is not None
            done.set_result(value)

    def run() -> None:
        try:
            value = fn(params)
        except BaseException as exc:
            loop.call_soon_threadsafe(settle, None, exc)
        else:
            loop.call_soon_threadsafe(settle, value, None)

    threading.Thread(target=run, name="mcphost-call-question", daemon=True).start()
    return await done


def _read_line(prompt: str) -> str:
    """One line from the terminal after ``prompt`` (on stderr); EOFError on end of input."""
    sys.stderr.write(prompt)
    sys.stderr.flush()
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line.rstrip("\n")
