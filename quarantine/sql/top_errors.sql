-- Top error messages: how many records fail with each, first and last seen.
--
-- One row per (pipeline, stage, error_class, message) of the latest failure of each
-- record, the most records first.
--
-- @table quarantine
-- @param pipeline string = '' — only this pipeline ('' = every pipeline)
-- @param status string(|open|replayed|discarded) = 'open' — only records with this status ('' = any)
SELECT pipeline, stage, error_class, message,
       count(*) AS records,
       min(first_seen_at) AS first_seen_at,
       max(last_seen_at) AS last_seen_at
FROM {{quarantine}}
WHERE (:pipeline = '' OR pipeline = :pipeline)
  AND (:status = '' OR status = :status)
GROUP BY pipeline, stage, error_class, message
ORDER BY records DESC, pipeline, stage, error_class, message
