-- Open records by pipeline, stage and error class: how many, and when they were first and last seen.
--
-- One row per (pipeline, stage, error_class) of the records still open, the most records first.
--
-- @table quarantine
-- @param pipeline string = '' — only this pipeline ('' = every pipeline)
-- @param stage string = '' — only this stage ('' = every stage)
-- @param error_class string = '' — only this error class ('' = every class)
SELECT pipeline, stage, error_class,
       count(*) AS records,
       min(first_seen_at) AS first_seen_at,
       max(last_seen_at) AS last_seen_at
FROM {{quarantine}}
WHERE status = 'open'
  AND (:pipeline = '' OR pipeline = :pipeline)
  AND (:stage = '' OR stage = :stage)
  AND (:error_class = '' OR error_class = :error_class)
GROUP BY pipeline, stage, error_class
ORDER BY records DESC, pipeline, stage, error_class
