"""One batch through a run: plan (pure DataFrame functions), stages chained, verdict, the writes."""
