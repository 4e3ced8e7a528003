"""The eval progress bar (rich): tasks done of all, successes, failures, infra failures and retries so far. Where
stderr is not a terminal (a log, a recipe's output) a bar cannot redraw: a plain line comes instead at every tenth of
the tasks and at least every `LINE_EVERY_S` seconds."""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter

LINE_EVERY_S = 30.0


class EvalProgress:
    """A rich progress bar fed from the worker threads; a no-op when disabled."""

    def __init__(self, total: int, done: int = 0, *, enabled: bool = True):
        self.counts: Counter[str] = Counter()
        self.retries = 0
        self._lock = threading.Lock()
        self._progress = None
        self._lines = enabled and not sys.stderr.isatty()
        self.total, self.done = total, done
        self._start = self._last = time.monotonic()
        self._next_line = done
        if self._lines:
            print(f"eval: {total - done} tasks to run ({done} done earlier)" if done else f"eval: {total} tasks to run",
                  file=sys.stderr, flush=True)  # fmt: skip
        elif enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("[bold]eval"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
            )
            self._task = self._progress.add_task(self._describe(), total=total, completed=done)

    def __enter__(self) -> EvalProgress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()

    def advance(self, key: str, status: str) -> None:
        """One task finished with `status`."""
        with self._lock:
            self.counts[status] += 1
            self.done += 1
            if self._progress is not None:
                self._progress.update(self._task, advance=1, description=self._describe())
            elif self._lines:
                self._line()

    def _line(self) -> None:
        """A plain progress line when the done count crosses a tenth, ends, or `LINE_EVERY_S` passed."""
        now = time.monotonic()
        if self.done < self._next_line and self.done < self.total and now - self._last < LINE_EVERY_S:
            return
        tenth = max(1, self.total // 10)
        self._next_line, self._last = (self.done // tenth + 1) * tenth, now
        c = self.counts
        line = f"eval: {self.done}/{self.total} tasks, {c['success']} successes, {c['failure']} failures, "
        print(f"{line}{c['infra_failure']} infra failures, {now - self._start:.0f} s", file=sys.stderr, flush=True)

    def retry(self, key: str, error: str | None) -> None:
        """An infra failure on `key` is retried."""
        with self._lock:
            self.retries += 1
            if self._progress is not None:
                self._progress.console.log(f"[yellow]infra failure on {key}, retrying[/]: {error}")
                self._progress.update(self._task, description=self._describe())

    def _describe(self) -> str:
        c = self.counts
        return (
            f"[green]✓ {c['success']}[/] [red]✗ {c['failure']}[/] [yellow]⚠ {c['infra_failure']}[/]"
            f" [dim]retries {self.retries}[/]"
        )
