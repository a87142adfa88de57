-- Stuck records: open longer than :hours hours, or failed more than :failures times.
--
-- One row per record, the most failures first, then the oldest. error_count counts every
-- failure of the record (a run that reads it again, a replay that fails again).
--
-- @table quarantine
-- @param pipeline string = '' — only this pipeline ('' = every pipeline)
-- @param hours int = 24 — open at least this many hours
-- @param failures int = 3 — or failed more than this many times
SELECT pipeline, topic, partition, offset, stage, error_class, message, error_count,
       first_seen_at, last_seen_at,
       round((unix_timestamp(current_timestamp()) - unix_timestamp(first_seen_at)) / 3600, 1) AS open_hours
FROM {{quarantine}}
WHERE status = 'open'
  AND (:pipeline = '' OR pipeline = :pipeline)
  AND (first_seen_at <= current_timestamp() - make_interval(0, 0, 0, 0, :hours, 0, 0)
       OR error_count > :failures)
ORDER BY error_count DESC, first_seen_at, pipeline, topic, partition, offset
