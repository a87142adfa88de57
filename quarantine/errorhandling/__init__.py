"""Kafka Connect's error handling for Spark: tolerance, handlers, the policy, breaches, retries."""
