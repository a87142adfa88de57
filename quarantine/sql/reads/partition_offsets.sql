-- Records and offsets per topic partition: all of them, then the open and the closed ones (the report's partitions).
--
-- An offset range is NULL where the partition has no such record.
--
-- @table quarantine
-- @param pipeline string — the pipeline
-- @param since timestamp — only records first seen at or after it (NULL: no bound)
SELECT topic, partition, count(1) AS records, min(offset) AS min_offset, max(offset) AS max_offset,
       sum(CAST(status = 'open' AS BIGINT)) AS open_records,
       min(CASE WHEN status = 'open' THEN offset END) AS open_min_offset,
       max(CASE WHEN status = 'open' THEN offset END) AS open_max_offset,
       min(CASE WHEN NOT (status = 'open') THEN offset END) AS closed_min_offset,
       max(CASE WHEN NOT (status = 'open') THEN offset END) AS closed_max_offset
FROM {{quarantine}}
WHERE pipeline = :pipeline AND (:since IS NULL OR first_seen_at >= :since)
GROUP BY topic, partition
ORDER BY topic, partition
