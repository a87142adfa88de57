"""The ``quarantine`` command's handlers: one module per command (``commands/run.py`` runs
``quarantine run``), imported only when that command runs.

:mod:`quarantine.cli` parses the command line with argparse alone, then imports the one
handler module the command names (``cli._handler``) and calls its ``handle``. Each handler
module imports at its top what its command needs, and nothing else: ``quarantine --help``
and ``--version`` import no handler, so no engine (pyspark, pandas, Great Expectations,
MLflow, Plotly); ``quarantine validate`` imports the config and the stage builder, not a
runner. The import that waits for its command is the one in ``cli._handler``: an edge the
import-graph test counts (``tests/unit/test_import_graph.py``), pointing one way — a handler
never imports :mod:`quarantine.cli` — so it is no circle. Chosen over a table of
``"module:attr"`` strings loaded with ``importlib``, which the graph cannot see, and over
imports inside each branch of one long function, which kept every command's code in one
module.

What every handler shares is below them: :mod:`quarantine.commands.options` (option values:
``--set``, ``--where``, ``--since``) and :mod:`quarantine.commands.invocation` (the parsed
command, its config loaded once, the tables a failure names).
"""
