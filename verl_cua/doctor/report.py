"""The doctor's run: system checks, then the recipe's (when one is named), one `Finding` a line."""

from __future__ import annotations

import sys
from typing import TextIO

from verl_cua.doctor.finding import Finding


def run_doctor(recipe: str | None = None, overrides: list[str] | None = None, out: TextIO = sys.stdout) -> int:
    """Print every finding; 1 when one of them blocks the run, 2 (one line on stderr) when RECIPE names no recipe,
    else 0."""
    from verl_cua.doctor.recipe import recipe_findings
    from verl_cua.doctor.recipe_source import RecipeNotFound, resolve_recipe
    from verl_cua.doctor.system import system_findings

    config = None
    findings: list[Finding] = []
    if recipe:
        try:
            source = resolve_recipe(recipe)
        except RecipeNotFound as exc:
            print(f"verl-cua doctor: {exc}", file=sys.stderr)
            return 2
        recipe_result, config = recipe_findings(source, overrides or [])
        findings += recipe_result
    findings = system_findings(config) + findings
    for finding in findings:
        print(finding.line(), file=out)
    blockers = sum(f.level == "FAIL" for f in findings)
    print(f"{'FAIL' if blockers else 'ok':<4}  doctor: {blockers} blocker(s), {len(findings)} findings", file=out)
    return 1 if blockers else 0
