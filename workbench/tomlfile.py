"""Reading the TOML files a user writes (run configs, clusters, graph recipes) with one-line errors."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from workbench.errors import ConfigError


def read_toml(path: str | Path, what: str) -> dict[str, Any]:
    """The table in ``path``; a missing, unreadable or malformed file raises :class:`ConfigError`
    naming the file and, for a missing one, ``what`` it should have been ("hardware file")."""
    p = Path(path)
    try:
        return tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{p}: no such {what}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read {what} ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: not valid TOML: {exc}") from None
