"""The deployment observer: a vLLM general plugin (entry point `vllm.general_plugins`,
declared in pyproject.toml) that counts, inside the draft model's graph, which MTP layer runs
at each draft position of a real `vllm serve`, and appends the counts to a JSON-lines log.

- plugin.py runs in the serving environment (torch + vLLM); it imports nothing from auditor/
  and nothing beyond the standard library, torch and vLLM.
- logfile.py reads and checks an observer log (pure Python, no torch), for
  `mtp-audit runtime observed` (cli.py).

See docs/observer.md.
"""
