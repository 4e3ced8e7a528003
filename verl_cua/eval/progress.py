"""The eval progress bar (rich): tasks done of all, successes, failures, infra failures and retries so far."""

from __future__ import annotations

import threading
from collections import Counter


class EvalProgress:
    """A rich progress bar fed from the worker threads; a no-op when disabled."""

    def __init__(self, total: int, done: int = 0, *, enabled: bool = True):
        self.counts: Counter[str] = Counter()
        self.retries = 0
        self._lock = threading.Lock()
        self._progress = None
        if enabled:
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
            if self._progress is not None:
                self._progress.update(self._task, advance=1, description=self._describe())

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
