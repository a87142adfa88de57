"""The Spark session: where it runs (the support matrix), its jars, and a local Connect server."""
