"""What an MCP tool call that fails says: one line (docs/mcp.md, "Errors"). The SDK
validates a call's arguments against the tool's schema and answers a bad one with pydantic's
report: a header, a line per error, its input and a link to errors.pydantic.dev. This server
answers `Error executing tool search: limit should be greater than or equal to 1 (got 0)`
instead, and any other tool error's text on one line too."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, InputRequiredResult
from pydantic import ValidationError
from pydantic_core import ErrorDetails

SHOWN_INPUT_CHARS = 40  # of a refused value, in the error: enough to recognise it
_SUBJECT = re.compile(r"^(?:Input|String|List|Value|Dictionary|Object|Integer|Number)\s+(?=should\b)")


class OneLineErrorServer(MCPServer[Any]):
    """MCPServer whose tool errors are one line each: argument errors in words, not pydantic's."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise  # the SDK's own line, without the crash's text
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):  # the arguments do not match the tool's schema
                raise ToolError(f"Error executing tool {name}: {argument_errors(cause)}") from cause
            raise ToolError(" ".join(str(exc).split())) from cause


def argument_errors(error: ValidationError) -> str:
    """Each refused argument in words, `; ` between them: `limit should be greater than or
    equal to 1 (got 0)`, `document is required`, `mode should be 'lexical', 'vector' or
    'hybrid' (got 'fuzzy')`."""
    return "; ".join(dict.fromkeys(_said(detail) for detail in error.errors(include_url=False))) or "bad arguments"


def _said(detail: ErrorDetails) -> str:
    where = _location(detail["loc"])
    if detail["type"] == "missing":
        return f"{where} is required"
    if detail["type"] == "extra_forbidden":
        return f"{where} is not an argument of this tool"
    message = _SUBJECT.sub("", detail["msg"].removeprefix("Value error, "))
    return " ".join(f"{where} {message} (got {_shown(detail.get('input'))})".split())


def _location(loc: Sequence[int | str]) -> str:
    where = ""
    for part in loc:
        where += f"[{part}]" if isinstance(part, int) else (f".{part}" if where else str(part))
    return where or "the arguments"


def _shown(value: object) -> str:
    text = "".join(ch if ch.isprintable() else "?" for ch in repr(value))
    return text if len(text) <= SHOWN_INPUT_CHARS else text[: SHOWN_INPUT_CHARS - 1] + "…"
