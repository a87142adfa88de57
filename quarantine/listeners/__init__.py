"""The run listeners that ship with quarantine: the Delta metrics table, MLflow, the error-context log.

The listener contract (:class:`~quarantine.report.RunListener`) and the events they receive
are :mod:`quarantine.report`'s; a pipeline's default listeners are chosen by
:meth:`quarantine.plan.default_listeners`.
"""
