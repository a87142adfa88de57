-- Offset ranges per topic partition: each run of consecutive quarantined offsets is one row.
--
-- Records without real coordinates (a non-Kafka source's synthetic negative offsets, see
-- "Unkeyed records") are left out: their offsets are hashes, not positions.
--
-- @table quarantine
-- @param pipeline string = '' — only this pipeline ('' = every pipeline)
-- @param status string(|open|replayed|discarded) = 'open' — only records with this status ('' = any)
WITH picked AS (
  SELECT pipeline, topic, partition, offset,
         offset - row_number() OVER (PARTITION BY pipeline, topic, partition ORDER BY offset) AS run
  FROM {{quarantine}}
  WHERE offset >= 0
    AND (:pipeline = '' OR pipeline = :pipeline)
    AND (:status = '' OR status = :status)
)
SELECT pipeline, topic, partition,
       min(offset) AS first_offset,
       max(offset) AS last_offset,
       count(*) AS records
FROM picked
GROUP BY pipeline, topic, partition, run
ORDER BY pipeline, topic, partition, first_offset
