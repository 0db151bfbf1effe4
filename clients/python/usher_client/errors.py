"""The error the client raises for an error answer of the server."""

from __future__ import annotations

import re
from typing import Any, List, Optional

import httpx

# A field path the server's texts begin with: "jobs[3].queue: ...",
# "results[0].snoozeMs: ...", "Idempotency-Key: ...".
_FIELD = re.compile(r"^([A-Za-z][A-Za-z0-9_-]*(?:\[\d+\])?(?:\.[A-Za-z][A-Za-z0-9_-]*(?:\[\d+\])?)*): ")


class UsherError(Exception):
    """An error answer of the server (any status outside 2xx).

    ``status`` is the HTTP status, ``message`` the text of the server's
    ``{"error": ...}`` body, ``field`` the field or value at fault that the
    text names first (``jobs[1].queue`` for ``jobs[1].queue: unknown queue
    "scan"``; ``None`` when it names none), ``cycle`` the jobs of a
    dependency cycle when a workflow was refused for one, and ``body`` the
    decoded body (``None`` when it was not JSON).

    Transport failures (the server unreachable, a timeout) are not
    UsherErrors: they are httpx's own ``httpx.TransportError``.
    """

    def __init__(self, status: int, message: str, *, field: Optional[str] = None,
                 cycle: Optional[List[str]] = None, body: Any = None) -> None:
        super().__init__(f"{message} (HTTP {status})")
        self.status = status
        self.message = message
        self.field = field
        self.cycle = cycle
        self.body = body

    @classmethod
    def from_response(cls, resp: httpx.Response) -> "UsherError":
        """Makes the error of an answer: the API's ``{"error": ...}`` body,
        or the body as text when it is not one."""
        body: Any = None
        try:
            body = resp.json()
        except ValueError:
            pass
        if isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"]:
            msg = body["error"]
            field = body.get("field")
            if not isinstance(field, str) or not field:
                m = _FIELD.match(msg)
                field = m.group(1) if m else None
            cycle = body.get("cycle")
            return cls(resp.status_code, msg, field=field,
                       cycle=list(cycle) if isinstance(cycle, list) else None, body=body)
        text = resp.text.strip()
        if len(text) > 512:
            text = text[:512] + "…"
        return cls(resp.status_code, text or resp.reason_phrase.lower(), body=body)


def retryable(err: BaseException) -> bool:
    """Whether a failed call may succeed when repeated: a transport error,
    408, 429 or 5xx."""
    if isinstance(err, UsherError):
        return err.status in (408, 429) or err.status >= 500
    return isinstance(err, httpx.TransportError)
