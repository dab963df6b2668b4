"""Who did it: every batch, run, close and reopen records its actor.

From the command line the actor is the operating-system user running the process (the
effective uid's account name, not ``$USER``, which any shell can set). Requests that come
through the service will record ``token:<name>`` instead; a POSIX user name cannot contain
``:``, so the two never collide.
"""

from __future__ import annotations

import getpass
import os

TOKEN_PREFIX = "token:"


def os_actor() -> str:
    """The account name of the effective user, or ``uid:<n>`` when it has none."""
    try:
        import pwd

        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):  # Windows, or a uid without a passwd entry (containers)
        try:
            return getpass.getuser()
        except OSError:
            return f"uid:{os.getuid()}" if hasattr(os, "getuid") else "unknown"


def token_actor(name: str) -> str:
    """The actor of a request made with the service token ``name``."""
    return f"{TOKEN_PREFIX}{name}"
