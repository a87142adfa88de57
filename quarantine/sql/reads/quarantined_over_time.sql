-- Records by the period they were first seen in and their stage (the report's over_time).
--
-- A period is first_seen_at truncated to :seconds from the epoch: UTC's hours and days in any
-- session time zone (date_trunc truncates in the session's).
--
-- @table quarantine
-- @param pipeline string — the pipeline
-- @param since timestamp — only records first seen at or after it (NULL: no bound)
-- @param seconds int — the period's length in seconds (3600: an hour, 86400: a day)
SELECT timestamp_seconds(floor(unix_seconds(first_seen_at) / :seconds) * :seconds) AS bucket, stage,
       count(1) AS records
FROM {{quarantine}}
WHERE pipeline = :pipeline AND (:since IS NULL OR first_seen_at >= :since)
GROUP BY bucket, stage
ORDER BY bucket, stage
