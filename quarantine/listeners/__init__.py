"""The run listeners that ship with quarantine (the Delta metrics table, MLflow), and the error-context log.

The error-context log (:mod:`quarantine.listeners.error_log`) is no listener: it is one of a plan's
error reporters (:mod:`quarantine.errorhandling.reporter`), told of each batch's failed records.

The listener contract (:class:`~quarantine.listeners.events.RunListener`) and the events they receive
are :mod:`quarantine.listeners.events`'s; a pipeline's default listeners are chosen by
:func:`quarantine.assemble.default_listeners`.
"""
