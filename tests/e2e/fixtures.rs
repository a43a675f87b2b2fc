//! Finding the msprobe fixtures, comparing trees of files, and checking what a dataset shows.

use std::path::{Path, PathBuf};

/// `tests/data/fixtures`: real msprobe output and msprobe's compare results for it (its
/// README says what each folder holds). `None` only where a checkout left it out, after one
/// notice.
pub fn root() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fixtures");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("skipping: {} not found (the real msprobe output of the repository)", dir.display());
        None
    }
}

/// Every run: each folder directly under `runs/` and `msprobe/`.
pub fn runs() -> Vec<PathBuf> {
    let Some(root) = root() else { return Vec::new() };
    let mut out = Vec::new();
    for group in ["runs", "msprobe"] {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join(group))
            .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_dir()).collect())
            .unwrap_or_default();
        dirs.sort();
        out.extend(dirs);
    }
    out
}

/// Every file below `dir`, relative to it, sorted.
pub fn files_below(dir: &Path) -> Vec<PathBuf> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else { return };
        for entry in rd.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(base, &path, out);
            } else if let Ok(rel) = path.strip_prefix(base) {
                out.push(rel.to_path_buf());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Asserts two byte strings are equal, reporting the first differing offset with context.
pub fn assert_same_bytes(what: &Path, want: &[u8], got: &[u8]) {
    if want == got {
        return;
    }
    let at = want.iter().zip(got).position(|(a, b)| a != b).unwrap_or(want.len().min(got.len()));
    let ctx = |b: &[u8]| String::from_utf8_lossy(&b[at.saturating_sub(60)..(at + 60).min(b.len())]).into_owned();
    panic!(
        "{}: differs at byte {at} (lengths {} vs {})\n--- expected ---\n{}\n--- got ---\n{}",
        what.display(),
        want.len(),
        got.len(),
        ctx(want),
        ctx(got)
    );
}

/// Asserts that `back` holds the same files as `src`, byte for byte.
pub fn assert_same_tree(src: &Path, back: &Path) {
    let files = files_below(src);
    assert_eq!(files, files_below(back), "{} and {} hold different files", src.display(), back.display());
    for rel in &files {
        let (a, b) = (std::fs::read(src.join(rel)).expect("read"), std::fs::read(back.join(rel)).expect("read"));
        assert_same_bytes(rel, &a, &b);
    }
}

/// Reads every unit committed in the local dataset `ds` whole (its `dump` rows are its leaf
/// count) and checks that `probelake sql` counts exactly those rows: what a crashed writer
/// leaves must never show. Returns the committed units.
pub fn assert_committed_units_whole(ds: &Path) -> Vec<probelake::format::CommitRecord> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let lake = probelake::format::Lake::local(ds).expect("open");
    let units = rt.block_on(lake.units()).expect("commit records are readable");
    let mut leaves = 0;
    for record in &units {
        let mut rows = 0;
        for file in &record.files {
            let batches = rt.block_on(lake.read_file(file)).expect("a committed file is whole");
            if file.table == probelake::format::Table::Dump {
                rows += batches.iter().map(|b| b.num_rows() as u64).sum::<u64>();
            }
        }
        assert_eq!(rows, record.counts.leaves, "{}", record.unit);
        leaves += rows;
    }
    let ds_text = ds.to_string_lossy().into_owned();
    let out = crate::cli::ok(["sql", &ds_text, "-c", "SELECT count(*) AS n FROM dump", "--format", "csv"]);
    let counted = String::from_utf8_lossy(&out.stdout).lines().nth(1).map(str::to_owned);
    assert_eq!(counted, Some(leaves.to_string()), "sql sees exactly the committed rows");
    units
}

/// Leftovers of killed writes are invisible to probelake but not to plain Parquet readers:
/// `vacuum --older-than 0s` on the local dataset `ds` must leave exactly the data files the
/// commit records name, and every committed unit whole. Returns the committed units.
pub fn assert_vacuum_leaves_only_named_files(ds: &Path) -> Vec<probelake::format::CommitRecord> {
    let before = assert_committed_units_whole(ds).len();
    let ds_text = ds.to_string_lossy().into_owned();
    let report = crate::cli::ok(["vacuum", &ds_text, "--older-than", "0s"]);
    let report = String::from_utf8_lossy(&report.stdout).into_owned();
    let data_files: Vec<PathBuf> = files_below(ds)
        .into_iter()
        .filter(|f| !f.starts_with("_probelake") && f.extension().is_some_and(|e| e == "parquet"))
        .collect();
    let units = assert_committed_units_whole(ds);
    let mut named: Vec<PathBuf> = units.iter().flat_map(|r| r.files.iter().map(|f| PathBuf::from(&f.path))).collect();
    named.sort();
    assert_eq!(data_files, named, "{report}");
    assert_eq!(units.len(), before);
    units
}
