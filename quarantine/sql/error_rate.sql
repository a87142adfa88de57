-- Error rate per topic and partition over time: failures from the quarantine table, records from the metrics table.
--
-- One row per period (the failure's time truncated to :bucket), pipeline, topic and partition:
-- failures counts the failures error_history holds (a record that failed in two periods counts
-- in both; error_history keeps each change of a record's error, its first and latest 9: a
-- record failing the same way again counts once, at its first such failure). The metrics table
-- counts per topic, not per partition, so the rate is the topic's: topic_quarantined /
-- topic_records_in for the same period (NULL when no metrics were written for it).
-- Periods are UTC's in any session time zone (a day starts at 00:00 UTC, a week on Monday
-- 00:00 UTC): computed from epoch seconds and the UTC date, not with date_trunc, which
-- truncates in the session time zone. A day's seconds are BIGINT: as INT they overflow for a
-- failure after 2038-01-19 or before 1901.
--
-- @table quarantine
-- @table metrics
-- @param pipeline string = '' — only this pipeline ('' = every pipeline)
-- @param bucket string(minute|hour|day|week|month) = 'hour' — the period
WITH failures AS (
  SELECT q.pipeline, q.topic, q.partition,
         CASE WHEN lower(:bucket) IN ('minute', 'hour', 'day', 'week', 'month')
              THEN CASE lower(:bucket)
                  WHEN 'minute' THEN timestamp_seconds(floor(unix_seconds(h.at) / 60) * 60)
                  WHEN 'hour' THEN timestamp_seconds(floor(unix_seconds(h.at) / 3600) * 3600)
                  WHEN 'day' THEN timestamp_seconds(floor(unix_seconds(h.at) / 86400) * 86400)
                  ELSE timestamp_seconds(CAST(unix_date(trunc(
                    date_from_unix_date(CAST(floor(unix_seconds(h.at) / 86400) AS INT)), :bucket)) AS BIGINT) * 86400)
                END
              ELSE raise_error(concat('bucket must be minute, hour, day, week or month, not ', :bucket))
         END AS period
  FROM {{quarantine}} q LATERAL VIEW explode(q.error_history) AS h
  WHERE (:pipeline = '' OR q.pipeline = :pipeline)
),
per_partition AS (
  SELECT period, pipeline, topic, partition, count(*) AS failures
  FROM failures
  GROUP BY period, pipeline, topic, partition
),
per_topic AS (
  SELECT CASE lower(:bucket)
           WHEN 'minute' THEN timestamp_seconds(floor(unix_seconds(recorded_at) / 60) * 60)
           WHEN 'hour' THEN timestamp_seconds(floor(unix_seconds(recorded_at) / 3600) * 3600)
           WHEN 'day' THEN timestamp_seconds(floor(unix_seconds(recorded_at) / 86400) * 86400)
           ELSE timestamp_seconds(CAST(unix_date(trunc(
             date_from_unix_date(CAST(floor(unix_seconds(recorded_at) / 86400) AS INT)), :bucket)) AS BIGINT) * 86400)
         END AS period,
         pipeline, topic,
         sum(value) FILTER (WHERE metric = 'records-in') AS records_in,
         sum(value) FILTER (WHERE metric = 'records-quarantined') AS quarantined
  FROM {{metrics}}
  WHERE metric IN ('records-in', 'records-quarantined') AND topic IS NOT NULL
    AND (:pipeline = '' OR pipeline = :pipeline)
  GROUP BY period, pipeline, topic
)
SELECT p.period, p.pipeline, p.topic, p.partition, p.failures,
       CAST(t.records_in AS BIGINT) AS topic_records_in,
       CAST(t.quarantined AS BIGINT) AS topic_quarantined,
       t.quarantined / nullif(t.records_in, 0) AS topic_error_rate
FROM per_partition p
LEFT JOIN per_topic t ON p.period = t.period AND p.pipeline = t.pipeline AND p.topic = t.topic
ORDER BY p.period DESC, p.pipeline, p.topic, p.partition
