"""What serves the operator after a run: triage queries, views, the report page, maintenance, rebuild."""
