-- The open records, one row each, with the value decoded where it is UTF-8 and in hex.
--
-- @table quarantine
SELECT pipeline, topic, partition, offset, timestamp, stage, kind, error_class, message,
       error_count, first_seen_at, last_seen_at, run_id, batch_id,
       key, value, headers,
       CASE WHEN is_valid_utf8(CAST(value AS STRING)) THEN CAST(value AS STRING) END AS value_text,
       hex(value) AS value_hex
FROM {{quarantine}}
WHERE status = 'open'
