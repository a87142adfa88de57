-- Records by status (stats' first table; the report's statuses).
--
-- @table quarantine
-- @param pipeline string — only this pipeline (NULL: every pipeline)
-- @param since timestamp — only records first seen at or after it (NULL: no bound)
SELECT status, count(1) AS records
FROM {{quarantine}}
WHERE (:pipeline IS NULL OR pipeline = :pipeline)
  AND (:since IS NULL OR first_seen_at >= :since)
GROUP BY status
ORDER BY status
