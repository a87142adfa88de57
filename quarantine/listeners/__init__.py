"""The run listeners that ship with quarantine: the Delta metrics table, MLflow, the error-context log.

The listener contract (:class:`~quarantine.listeners.events.RunListener`) and the events they receive
are :mod:`quarantine.listeners.events`'s; a pipeline's default listeners are chosen by
:func:`quarantine.assemble.default_listeners`.
"""
