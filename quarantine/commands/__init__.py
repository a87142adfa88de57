"""The ``quarantine`` command's handlers: one module per command (``commands/run.py`` runs
``quarantine run``), imported only when that command runs.

:mod:`quarantine.cli` parses the command line with argparse alone, then imports the one
handler module the command names (``cli.HANDLERS``, a table of module names) and calls its
``handle``. Each handler module imports at its top what its command needs, and nothing else:
``quarantine --help`` and ``--version`` import no handler, so no engine (pyspark, pandas,
Great Expectations, MLflow, Plotly); ``quarantine validate`` imports the config and the stage
builder, not a runner. The table's names are edges the import-graph test counts
(``tests/unit/test_import_graph.py`` reads the module names held by a module that imports
by name), pointing one way — a handler never imports :mod:`quarantine.cli` — so there is no
circle, seen or unseen; the one function that imports is three lines, not one branch per command.

What every handler shares is below them: :mod:`quarantine.commands.options` (option values:
``--set``, ``--where``, ``--since``) and :mod:`quarantine.commands.invocation` (the parsed
command, its config loaded once, the tables a failure names).
"""
