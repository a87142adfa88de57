-- Open records per topic partition, with their lowest and highest offset (stats).
--
-- @table quarantine
-- @param pipeline string — only this pipeline (NULL: every pipeline)
SELECT topic, partition, count(1) AS records, min(offset) AS min_offset, max(offset) AS max_offset
FROM {{quarantine}}
WHERE (:pipeline IS NULL OR pipeline = :pipeline) AND status = 'open'
GROUP BY topic, partition
ORDER BY topic, partition
