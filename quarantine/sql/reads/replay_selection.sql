-- The open rows a replay (or a discard) would take, by their quarantined stage and error class.
--
-- Each group's example is its smallest message (the same one each time). The quarantine
-- view here is the one --where has filtered already.
--
-- @table quarantine
-- @param pipeline string — the pipeline
SELECT stage, error_class, count(1) AS records, min(message) AS example
FROM {{quarantine}}
WHERE pipeline = :pipeline AND status = 'open'
GROUP BY stage, error_class
