"""Findings and the doctor's run: system checks, then the recipe's (when one is named)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TextIO

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


def run_doctor(recipe: str | None = None, overrides: list[str] | None = None, out: TextIO = sys.stdout) -> int:
    """Print every finding; 1 when one of them blocks the run, else 0."""
    from verl_cua.doctor.recipe import recipe_findings
    from verl_cua.doctor.system import system_findings

    config = None
    findings: list[Finding] = []
    if recipe:
        recipe_result, config = recipe_findings(recipe, overrides or [])
        findings += recipe_result
    findings = system_findings(config) + findings
    for finding in findings:
        print(finding.line(), file=out)
    blockers = sum(f.level == "FAIL" for f in findings)
    print(f"{'FAIL' if blockers else 'ok':<4}  doctor: {blockers} blocker(s), {len(findings)} findings", file=out)
    return 1 if blockers else 0
