"""The one strict base class of every rule-file model.

Rule files are written by hand and read by people defending numbers: an unknown field is a
typo until proven otherwise, so every model forbids extra fields; models are frozen so a
loaded rule cannot change under a running allocation; aliases (``class``) and field names
are both accepted.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """Forbid unknown fields, freeze instances, accept aliases and field names alike."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)
