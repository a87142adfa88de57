-- Records per pipeline, status, stage and error class, with when they were first and last seen.
--
-- @table quarantine
SELECT pipeline, status, stage, error_class,
       count(*) AS records,
       min(first_seen_at) AS first_seen_at,
       max(last_seen_at) AS last_seen_at
FROM {{quarantine}}
GROUP BY pipeline, status, stage, error_class
