"""``python -m auditor.cli``."""

from .app import main

main()
