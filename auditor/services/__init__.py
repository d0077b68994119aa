"""Services: everything a command does apart from parsing its arguments and printing —
opening targets, settings, plugins, baselines, and the scan, lint, layers and history
runs. The command line (:mod:`auditor.cli`) calls these; they never print a report."""
