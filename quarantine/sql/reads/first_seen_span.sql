-- The first and last first_seen_at of a pipeline's records (the report's time unit).
--
-- @table quarantine
-- @param pipeline string — the pipeline
-- @param since timestamp — only records first seen at or after it (NULL: no bound)
SELECT min(first_seen_at), max(first_seen_at)
FROM {{quarantine}}
WHERE pipeline = :pipeline AND (:since IS NULL OR first_seen_at >= :since)
