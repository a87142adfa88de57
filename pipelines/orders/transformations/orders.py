"""The pipeline's one source file: the config's stages, a target table and a quarantine table."""

from quarantine.declarative import declare

declare("orders.yml")  # read from the pipeline's root folder (where spark-pipeline.yml is)
