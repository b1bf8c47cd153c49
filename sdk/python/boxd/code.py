"""The code interpreter: Sandbox.run_code and its results (CodeService).

Code runs in a long-lived IPython kernel in the sandbox, one per named
context, so variables and imports persist between calls. The image needs
python3, python3-ipykernel and python3-jupyter-client (boxd's Debian image
has them, with matplotlib). See docs/interpreter.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Union

from .types import duration
from .v1 import interp_pb2

OnText = Optional[Callable[[str], None]]


@dataclass
class CodeOutput:
    """One MIME bundle: the same content as one or more of text/plain,
    text/html, image/png (decoded bytes), image/svg+xml, application/json
    and text/markdown."""

    data: Dict[str, bytes]

    @property
    def text(self) -> Optional[str]:
        b = self.data.get("text/plain")
        return None if b is None else b.decode("utf-8", errors="replace")

    @property
    def html(self) -> Optional[str]:
        b = self.data.get("text/html")
        return None if b is None else b.decode("utf-8", errors="replace")

    @property
    def png(self) -> Optional[bytes]:
        return self.data.get("image/png")

    @property
    def svg(self) -> Optional[str]:
        b = self.data.get("image/svg+xml")
        return None if b is None else b.decode("utf-8", errors="replace")

    @property
    def markdown(self) -> Optional[str]:
        b = self.data.get("text/markdown")
        return None if b is None else b.decode("utf-8", errors="replace")

    @property
    def json(self) -> Any:
        b = self.data.get("application/json")
        return None if b is None else json.loads(b)


@dataclass
class CodeError:
    """An exception the code raised."""

    name: str
    value: str
    traceback: List[str]


@dataclass
class CodeResult:
    """How a run ended: its output, the last expression's value, what it
    displayed, and the exception it raised, if any."""

    stdout: str = ""
    stderr: str = ""
    value: Optional[CodeOutput] = None
    displays: List[CodeOutput] = field(default_factory=list)
    error: Optional[CodeError] = None
    truncated: bool = False
    timed_out: bool = False
    #: The cell was interrupted (timeout); the context survived unless
    #: restarted is set.
    interrupted: bool = False
    #: The context's kernel started afresh: its state is gone.
    restarted: bool = False
    execution_count: int = 0
    context: str = ""
    duration_ms: int = 0

    @property
    def text(self) -> Optional[str]:
        """The value's text/plain form (None when the cell has no value)."""
        return self.value.text if self.value else None


def _bundle(o: interp_pb2.CodeOutput) -> CodeOutput:
    return CodeOutput(data=dict(o.data))


def run_code(client: Any, sandbox_id: str, code: str, *, language: str = "python", context: Optional[str] = None,
             timeout: Union[float, str, None] = None, output_limit: int = 0, on_stdout: OnText = None,
             on_stderr: OnText = None, request_timeout: Optional[float] = None) -> CodeResult:
    req = interp_pb2.RunCodeRequest(sandbox_id=sandbox_id, code=code, language=language, context=context or "",
                                    timeout=duration(timeout), output_limit=output_limit)
    out: List[str] = []
    err: List[str] = []
    res = CodeResult()
    with client.stream(client.code.RunCode, req, request_timeout) as s:
        for msg in s:
            kind = msg.WhichOneof("event")
            if kind == "stdout":
                text = msg.stdout.decode("utf-8", errors="replace")
                out.append(text)
                if on_stdout:
                    on_stdout(text)
            elif kind == "stderr":
                text = msg.stderr.decode("utf-8", errors="replace")
                err.append(text)
                if on_stderr:
                    on_stderr(text)
            elif kind == "result":
                r = msg.result
                res = CodeResult(
                    value=_bundle(r.value) if r.HasField("value") else None,
                    displays=[_bundle(d) for d in r.displays],
                    error=CodeError(r.error.name, r.error.value, list(r.error.traceback)) if r.HasField("error") else None,
                    truncated=r.truncated, timed_out=r.timed_out, interrupted=r.interrupted, restarted=r.restarted,
                    execution_count=r.execution_count, context=r.context, duration_ms=r.duration_ms)
    res.stdout, res.stderr = "".join(out), "".join(err)
    return res


def list_contexts(client: Any, sandbox_id: str) -> List[str]:
    r = client.unary(client.code.ListCodeContexts, interp_pb2.ListCodeContextsRequest(sandbox_id=sandbox_id))
    return [c.name for c in r.contexts]


def restart_context(client: Any, sandbox_id: str, context: str) -> None:
    client.unary(client.code.RestartCodeContext, interp_pb2.RestartCodeContextRequest(sandbox_id=sandbox_id,
                                                                                       context=context))


def delete_context(client: Any, sandbox_id: str, context: str) -> None:
    client.unary(client.code.DeleteCodeContext, interp_pb2.DeleteCodeContextRequest(sandbox_id=sandbox_id,
                                                                                     context=context))
