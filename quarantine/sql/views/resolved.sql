-- The records that left open (replayed or discarded): when and how.
--
-- @table quarantine
SELECT pipeline, topic, partition, offset, status, resolved_at, resolution,
       stage, error_class, message, error_count, first_seen_at
FROM {{quarantine}}
WHERE status <> 'open'
