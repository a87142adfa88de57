-- Replay and discard history: records that left open, per day, status and resolution.
--
-- Read from each row's own columns (status, resolved_at, resolution): a record is closed
-- once and stays closed, so they hold its whole resolution history. resolution is
-- "replayed by run <run id>" (or "passed on re-run, run <run id>") or "discarded: <reason>".
-- The day is resolved_at's UTC date in any session time zone: whole days since the epoch,
-- not date(resolved_at), which is the session time zone's date.
--
-- @table quarantine
-- @param pipeline string = '' — only this pipeline ('' = every pipeline)
-- @param status string(|replayed|discarded) = '' — only replayed or only discarded ('' = both)
SELECT date_from_unix_date(CAST(floor(unix_seconds(resolved_at) / 86400) AS INT)) AS resolved_date, pipeline, status, resolution,
       count(*) AS records,
       min(resolved_at) AS first_resolved_at,
       max(resolved_at) AS last_resolved_at
FROM {{quarantine}}
WHERE status <> 'open'
  AND (:pipeline = '' OR pipeline = :pipeline)
  AND (:status = '' OR status = :status)
GROUP BY resolved_date, pipeline, status, resolution
ORDER BY resolved_date DESC, pipeline, status, resolution
