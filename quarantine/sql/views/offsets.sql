-- Open records per topic partition: how many, and their lowest and highest offset.
--
-- @table quarantine
SELECT pipeline, topic, partition,
       count(*) AS records,
       min(offset) AS min_offset,
       max(offset) AS max_offset
FROM {{quarantine}}
WHERE status = 'open'
GROUP BY pipeline, topic, partition
