"""The writes: the target, the quarantine table, the DLQ topic, and who owns a target's topics.

target.py, quarantine.py, dlq_topic.py and ownership.py; the Delta helpers every writer
uses (a table by path or catalog name, its version, SQL literals) are
:mod:`quarantine.tables`, below this package.
"""
