-- How does one op's output move across steps? Max/min/mean/norm of the first output of every
-- call of `op` (edit it in `params`), per step, stage and rank.
-- Runs: one (the default schema).
WITH params AS (SELECT 'Functional.layer_norm' AS op)
SELECT d.step, d.stage, d.rank, d.name, d.item, d.max, d.min, d.mean, d.norm
FROM dump d CROSS JOIN params p
WHERE d.op = p.op AND d.section = 'output' AND d.path = '0' AND d.direction = 'forward'
ORDER BY d.name, d.stage, d.rank, d.step;
