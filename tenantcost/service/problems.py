"""An API error with fields beside ``detail`` (the record index and field of a bad record).

FastAPI nests a dict ``detail`` as ``{"detail": {...}}``; a :class:`Problem` is answered flat,
``{"detail": "records[3], column 'requests': ...", "record": 3, "field": "requests"}``, so
clients read the same ``detail`` string from every error.
"""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse, Response


class Problem(HTTPException):
    """An HTTP error whose body is ``{"detail": detail, **fields}``."""

    def __init__(self, status: int, detail: str, **fields: Any) -> None:
        super().__init__(status, detail)
        self.fields = fields


async def problem_response(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Problem)
    return JSONResponse({"detail": exc.detail, **exc.fields}, status_code=exc.status_code)
