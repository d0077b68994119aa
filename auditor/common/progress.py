"""Progress of long steps on stderr.

On a terminal a rich progress bar; otherwise (CI logs, pipes) one plain line per phase
or step, so that a log shows what a slow run is doing. ``quiet`` silences both. Progress
never goes to stdout: that is where reports go.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable, Iterator, Optional, TextIO

PREFIX = "mtp-audit: "


class Progress:
    def __init__(self, quiet: bool = False, stream: Optional[TextIO] = None) -> None:
        self.quiet = quiet
        self.stream = stream if stream is not None else sys.stderr

    @property
    def enabled(self) -> bool:
        return not self.quiet

    @property
    def interactive(self) -> bool:
        """A terminal that can show a live bar."""
        try:
            return self.enabled and self.stream.isatty()
        except (AttributeError, ValueError):
            return False

    def line(self, message: str) -> None:
        """One line on stderr (on a terminal too), unless quiet."""
        if self.enabled:
            self.stream.write(PREFIX + message + "\n")
            self.stream.flush()

    def phase(self, message: str) -> None:
        """A phase starts: a line in logs; nothing on a terminal, where a bar or the result follows quickly."""
        if self.enabled and not self.interactive:
            self.line(message)

    @contextmanager
    def steps(self, label: str, total: int) -> Iterator[Callable[[str], None]]:
        """Yields ``step(name)``, called before each of ``total`` steps."""
        if not self.enabled:
            yield lambda name: None
            return
        if not self.interactive:
            done = [0]

            def log(name: str) -> None:
                done[0] += 1
                self.line(f"{label} {done[0]}/{total}: {name}")

            yield log
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn, TimeElapsedColumn

        bar = Bar(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[current]}"),
            console=Console(file=self.stream),
            transient=False,
        )
        task = bar.add_task(label, total=total, current="")
        started = [False]

        def advance(name: str) -> None:
            if started[0]:
                bar.advance(task)
            started[0] = True
            bar.update(task, current=name)

        bar.start()
        try:
            yield advance
            if started[0]:
                bar.advance(task)
            bar.update(task, current="done")
        finally:
            bar.stop()
