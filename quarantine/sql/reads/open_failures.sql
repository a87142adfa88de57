-- Open records by stage and error class, with when they were first and last seen (stats).
--
-- @table quarantine
-- @param pipeline string — only this pipeline (NULL: every pipeline)
SELECT stage, error_class, count(1) AS records,
       min(first_seen_at) AS first_seen_at, max(last_seen_at) AS last_seen_at
FROM {{quarantine}}
WHERE (:pipeline IS NULL OR pipeline = :pipeline) AND status = 'open'
GROUP BY stage, error_class
ORDER BY records DESC, stage, error_class
