"""The values a config and its stages are written in, below both: each config key's type
(:mod:`~quarantine.values.types`, :mod:`~quarantine.values.options`: a validator with its JSON
Schema, pydantic's errors as one ConfigError), the base of a config section
(:mod:`~quarantine.values.section`), and how a Spark value is typed, compared and shown in a
message (:mod:`~quarantine.values.spark`)."""
