-- What does each stage hold? Per (step, stage): ranks, entries, leaves, tensors, non-finite
-- tensors, and the largest norm seen.
-- Runs: one (the default schema).
SELECT step, stage,
       count(DISTINCT rank) AS ranks,
       count(DISTINCT name) AS entries,
       count(*) AS leaves,
       sum(CASE WHEN kind LIKE '%Tensor%' THEN 1 ELSE 0 END) AS tensors,
       sum(CASE WHEN NOT is_finite_stats(max, min, mean, norm) THEN 1 ELSE 0 END) AS non_finite,
       max(norm) FILTER (WHERE isnan(norm) = false) AS max_norm
FROM dump
GROUP BY step, stage
ORDER BY step, stage;
