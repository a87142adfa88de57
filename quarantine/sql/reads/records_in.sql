-- The source records a pipeline's runs read (the report's records in).
--
-- records-in has one row per topic per batch: their sum is the total, over the pipeline's own runs
-- only (run_kind run, or NULL: written before the column existed). A replay's records in are the
-- records it selected from quarantine: they were counted when first read.
--
-- @table metrics
-- @param pipeline string — the pipeline
-- @param since timestamp — only rows recorded at or after it (NULL: no bound)
SELECT sum(value)
FROM {{metrics}}
WHERE pipeline = :pipeline AND (:since IS NULL OR recorded_at >= :since)
  AND metric = 'records-in' AND coalesce(run_kind, 'run') = 'run'
