"""Errors a user sees: one line, a location where there is one, an exit code."""
from __future__ import annotations

from dataclasses import dataclass


class FpspecError(Exception):
    """Bad input or a refusal: printed as one line by the CLI, exit code `exit_code`."""

    exit_code = 2


class RevealRefused(FpspecError):
    """The target cannot be revealed (nondeterministic, order-independent, ...)."""

    exit_code = 3


@dataclass(frozen=True)
class Location:
    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


class SpecError(FpspecError):
    """A malformed or inconsistent .fps spec; str() is `FILE:LINE:COL: message`."""

    def __init__(self, message: str, location: Location | None = None):
        self.message = message
        self.location = location
        super().__init__(f"{location}: {message}" if location else message)
