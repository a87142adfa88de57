-- inspect: the quarantine rows a filter selects, the most recently seen first.
--
-- A NULL filter value selects every row. A header's key is BINARY in the view the engines
-- register (its bytes as stored), so a key that is not UTF-8 is shown as hex.
--
-- @table quarantine
-- @param pipeline string — only this pipeline (NULL: every pipeline)
-- @param status string — only this status (NULL: every status)
-- @param stage string — only records that failed in this stage (NULL: any)
-- @param error_class string — only records with this error class (NULL: any)
-- @param since timestamp — only records last seen at or after it (NULL: no bound)
-- @param until timestamp — only records last seen before it (NULL: no bound)
-- @param limit int — at most this many rows
SELECT *
FROM {{quarantine}}
WHERE (:pipeline IS NULL OR pipeline = :pipeline)
  AND (:status IS NULL OR status = :status)
  AND (:stage IS NULL OR stage = :stage)
  AND (:error_class IS NULL OR error_class = :error_class)
  AND (:since IS NULL OR last_seen_at >= :since)
  AND (:until IS NULL OR last_seen_at < :until)
ORDER BY last_seen_at DESC, topic, partition, offset
LIMIT :limit
