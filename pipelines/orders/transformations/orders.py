from quarantine.declarative import declare

declare("orders.yml")  # read from the pipeline's root folder (where spark-pipeline.yml is)
