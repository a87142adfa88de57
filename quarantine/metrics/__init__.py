"""Kafka's error metrics: the names and cells, the columns that count a batch, the observed row."""
