"""User-facing errors.

Anything a user can cause (a bad name, a bad file, an impossible parameter) raises a
subclass of :class:`WorkbenchError`. The command line prints its message on one line
and exits non-zero without a traceback; every other exception is a bug and keeps its
traceback.
"""

from __future__ import annotations


class WorkbenchError(Exception):
    """A problem with the user's input; the message says what and where."""


class ConfigError(WorkbenchError):
    """A configuration or spec file has a missing, unknown or invalid field."""


class UnknownNameError(WorkbenchError, KeyError):
    """A name (strategy, preset, model, ...) that is not registered."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class GraphFormatError(WorkbenchError):
    """A file that should hold a graph does not."""


class TraceFormatError(WorkbenchError):
    """A trace table that does not follow the schema."""


class PlanError(WorkbenchError):
    """An iteration plan that is malformed or cannot run on the given hardware."""


class InfeasiblePlanError(PlanError):
    """A plan whose resident tensors do not fit in some GPU's memory."""
