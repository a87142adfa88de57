-- The error classes with the most records, and how many of them are open (the report's error_classes).
--
-- @table quarantine
-- @param pipeline string — the pipeline
-- @param since timestamp — only records first seen at or after it (NULL: no bound)
-- @param top int — how many error classes
SELECT error_class, count(1) AS records, sum(CAST(status = 'open' AS BIGINT)) AS open_records
FROM {{quarantine}}
WHERE pipeline = :pipeline AND (:since IS NULL OR first_seen_at >= :since)
GROUP BY error_class
ORDER BY records DESC, error_class ASC NULLS LAST
LIMIT :top
