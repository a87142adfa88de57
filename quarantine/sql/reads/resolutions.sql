-- The latest resolutions, oldest first: each replay or discard closes its rows with one resolved_at and
-- one resolution, so each row is one of them (the report's replays).
--
-- @table quarantine
-- @param pipeline string — the pipeline
-- @param since timestamp — only rows resolved at or after it (NULL: no bound)
-- @param latest int — how many resolutions
SELECT * FROM (
  SELECT resolved_at, status, resolution, count(1) AS records
  FROM {{quarantine}}
  WHERE pipeline = :pipeline AND (:since IS NULL OR resolved_at >= :since)
    AND status != 'open' AND resolved_at IS NOT NULL
  GROUP BY resolved_at, status, resolution
  ORDER BY resolved_at DESC
  LIMIT :latest
) AS latest
ORDER BY resolved_at, status, resolution
