"""The ``quarantine`` commands: one module per command (``commands/run.py`` is ``quarantine run``).

A command module declares the command whole, as pip's commands do: its help, its examples,
its arguments and its handler (``COMMAND``, a :class:`~quarantine.commands.invocation.Command`).
:data:`quarantine.cli.COMMANDS` names the modules, one line each; a new command is a module
and that line.

``quarantine --help`` builds every command's parser, so a command module imports at its top
only argparse and what the commands share below them (:mod:`quarantine.commands.options`:
``--conf``/``--set``, ``--where``, ``--since``; :mod:`quarantine.commands.invocation`): no
engine (pyspark, pandas, Great Expectations, MLflow, Plotly), and not the config. Its handler
imports what its command runs when it runs (the pipeline for ``run``, the config and the
stage builder, not a runner, for ``validate``; the reads, whose engine is picked then, for
``inspect``): no command pays for another's. :mod:`quarantine.commands.configured` loads a
command's config, once.
"""
