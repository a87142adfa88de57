-- How many replays and discards ran, by kind (the report's summary).
--
-- From the metrics table, so a replay that closed nothing (its records failed again) counts: the
-- quarantine table's closed rows show only the runs that closed some.
--
-- @table metrics
-- @param pipeline string — the pipeline
-- @param since timestamp — only rows recorded at or after it (NULL: no bound)
SELECT run_kind, count(DISTINCT run_id) AS runs
FROM {{metrics}}
WHERE pipeline = :pipeline AND (:since IS NULL OR recorded_at >= :since)
  AND run_kind IN ('replay', 'discard')
GROUP BY run_kind
ORDER BY run_kind
