-- Which ops produced NaN or infinity? Every tensor leaf whose statistics are not all finite,
-- in execution order, with the first one per (step, stage, rank) marked.
-- Runs: one (the default schema), e.g. `probelake sql ./lake/run-a -f sql/nan_inf.sql`.
SELECT step, stage, rank, seq, name, item, dtype, max, min, mean, norm,
       row_number() OVER (PARTITION BY step, stage, rank ORDER BY seq, leaf) = 1 AS first_in_unit
FROM dump
WHERE kind LIKE '%Tensor%' AND NOT is_finite_stats(max, min, mean, norm)
ORDER BY step, stage, rank, seq, leaf;
