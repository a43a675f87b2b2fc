-- Where do two runs differ most? The 20 output leaves with the largest relative error of
-- their norm (or max when there is no norm) between runs `target` and `golden`.
-- Runs: --run target=DATASET --run golden=DATASET.
SELECT t.step, t.stage, t.rank, t.item,
       coalesce(rel_err(t.norm, g.norm), rel_err(t.max, g.max)) AS rel_err,
       t.norm AS target_norm, g.norm AS golden_norm, t.max AS target_max, g.max AS golden_max
FROM target.dump t
JOIN golden.dump g ON t.step = g.step AND t.stage = g.stage AND t.rank = g.rank AND t.item = g.item
WHERE t.section = 'output' AND coalesce(rel_err(t.norm, g.norm), rel_err(t.max, g.max)) > 0
ORDER BY rel_err DESC, t.step, t.stage, t.rank, t.item
LIMIT 20;
