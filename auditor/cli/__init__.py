"""The ``mtp-audit`` command line: one module per command group, options declared once in
:mod:`auditor.cli.options`; the application and its error handling in :mod:`auditor.cli.app`."""

from .app import app, main

__all__ = ["app", "main"]
