-- Replay and discard history: records that left open, per day, status and resolution.
--
-- Read from each row's own columns (status, resolved_at, resolution): a record is closed
-- once and stays closed, so they hold its whole resolution history. resolution is
-- "replayed by run <run id>" (or "passed on re-run, run <run id>") or "discarded: <reason>".
--
-- @table quarantine
-- @param pipeline string = '' — only this pipeline ('' = every pipeline)
-- @param status string(|replayed|discarded) = '' — only replayed or only discarded ('' = both)
SELECT date(resolved_at) AS resolved_date, pipeline, status, resolution,
       count(*) AS records,
       min(resolved_at) AS first_resolved_at,
       max(resolved_at) AS last_resolved_at
FROM {{quarantine}}
WHERE status <> 'open'
  AND (:pipeline = '' OR pipeline = :pipeline)
  AND (:status = '' OR status = :status)
GROUP BY date(resolved_at), pipeline, status, resolution
ORDER BY resolved_date DESC, pipeline, status, resolution
