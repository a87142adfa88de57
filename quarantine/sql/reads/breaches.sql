-- Tolerance breaches per run and kind of breach, for the latest runs with a breach, oldest first (the report's breaches).
--
-- A run's `at` is when its first breach row was recorded. stage is the kind: NULL for an error
-- limit's breach (errors.tolerance*, a fail handler), a judging stage's name for its aggregate
-- expectations' breaches. A metric's rows partition its batch total, so a sum never counts twice;
-- the run-end row of a breach that ended a run (batch_id NULL) is one of them. The sum of whole
-- breaches written as DOUBLE is made whole by floor (every value is above 0).
--
-- @table metrics
-- @param pipeline string — the pipeline
-- @param since timestamp — only rows recorded at or after it (NULL: no bound)
-- @param latest int — how many runs
WITH per_kind AS (
  SELECT run_id, `at`, stage, CAST(floor(sum(value)) AS BIGINT) AS breaches
  FROM (
    SELECT *, min(recorded_at) OVER (PARTITION BY run_id) AS `at`
    FROM {{metrics}}
    WHERE pipeline = :pipeline AND (:since IS NULL OR recorded_at >= :since)
      AND metric = 'tolerance-breaches' AND value > 0
  ) AS breach_rows
  GROUP BY run_id, `at`, stage
),
runs AS (
  SELECT DISTINCT run_id, `at` FROM per_kind ORDER BY `at` DESC, run_id LIMIT :latest
)
SELECT per_kind.run_id, per_kind.`at`, breaches, stage
FROM per_kind JOIN runs ON per_kind.run_id = runs.run_id AND per_kind.`at` = runs.`at`
ORDER BY per_kind.`at`, per_kind.run_id, stage ASC NULLS FIRST
