"""The trajectory viewer: a static HTML report of runs (`verl-cua view`) and run comparison (`verl-cua compare`)."""

from verl_cua.viewer.compare import compare_dirs, compare_runs, print_compare
from verl_cua.viewer.report import build_report
from verl_cua.viewer.runs import Run, load_run, load_runs

__all__ = ["Run", "build_report", "compare_dirs", "compare_runs", "load_run", "load_runs", "print_compare"]
