-- Top errors by stage and error class: how many records fail with each, an example message, first and last seen.
--
-- One row per (pipeline, stage, error_class) of the latest failure of each record, the most
-- records first. Not per message: a message names the value it found, so one bug (a range
-- check) gives as many messages as values. messages counts them; example_message is the
-- smallest (the same one each time).
--
-- @table quarantine
-- @param pipeline string = '' — only this pipeline ('' = every pipeline)
-- @param status string(|open|replayed|discarded) = 'open' — only records with this status ('' = any)
SELECT pipeline, stage, error_class,
       count(*) AS records,
       count(DISTINCT message) AS messages,
       min(message) AS example_message,
       min(first_seen_at) AS first_seen_at,
       max(last_seen_at) AS last_seen_at
FROM {{quarantine}}
WHERE (:pipeline = '' OR pipeline = :pipeline)
  AND (:status = '' OR status = :status)
GROUP BY pipeline, stage, error_class
ORDER BY records DESC, pipeline, stage, error_class
