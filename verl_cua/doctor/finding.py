"""One line of the doctor's report: what was checked, what was found, and how bad it is."""

from __future__ import annotations

from dataclasses import dataclass

LEVELS = ("ok", "info", "warn", "FAIL")


@dataclass(frozen=True)
class Finding:
    """One line of the report: a level (ok, info, warn, FAIL), what was checked, and what was found."""

    level: str
    check: str
    detail: str

    def line(self) -> str:
        """The finding as one printed line."""
        return f"{self.level:<4}  {self.check}: {self.detail}"
