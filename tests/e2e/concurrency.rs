//! Many writers, one dataset: one `probelake import` process per rank commits its unit into the
//! same dataset at the same time, while a reader queries it; the reader only ever sees whole
//! units, and at the end every rank's unit is there and exports byte for byte.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::cli;
use crate::fixtures::assert_same_tree;

const RANKS: usize = 6;

#[test]
fn one_import_per_rank_at_once_and_readers_see_whole_units() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("tree");
    let ranks = RANKS.to_string();
    let args = ["--layout", "msprobe", "--steps", "1", "--layers", "24", "--ranks", ranks.as_str(), "-q"];
    cli::ok([Path::new("synth"), &src].into_iter().map(Path::as_os_str).chain(args.iter().map(|a| a.as_ref())));

    // The leaves of one rank's unit (every rank runs the same ops on other tokens).
    let one = tmp.path().join("one");
    cli::import(&src.join("step0/rank0"), &one);
    let per_unit: u64 = count(&one).expect("a count");
    assert!(per_unit > 0);

    let dst = tmp.path().join("lake");
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (dst, done) = (dst.clone(), Arc::clone(&done));
        std::thread::spawn(move || {
            let (mut seen, mut failures) = (Vec::new(), 0);
            while !done.load(Ordering::SeqCst) {
                match count(&dst) {
                    Some(n) => seen.push(n),
                    // Before the first commit there is no dataset to query; after it, every
                    // query must succeed.
                    None if !seen.is_empty() => failures += 1,
                    None => {}
                }
            }
            (seen, failures)
        })
    };
    let writers: Vec<Child> = (0..RANKS)
        .map(|r| {
            // Staggered a little, so that the reader sees the units arrive one by one too.
            std::thread::sleep(std::time::Duration::from_millis(150));
            Command::new(env!("CARGO_BIN_EXE_probelake"))
                .args([Path::new("import"), &src.join(format!("step0/rank{r}")), &dst, Path::new("-q")])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("import starts")
        })
        .collect();
    for (r, writer) in writers.into_iter().enumerate() {
        let out = writer.wait_with_output().expect("import ends");
        assert!(out.status.success(), "rank {r}: {}", String::from_utf8_lossy(&out.stderr));
    }
    done.store(true, Ordering::SeqCst);
    let (seen, failures) = reader.join().expect("the reader");
    assert_eq!(failures, 0, "queries failed while units were being committed");
    eprintln!("row counts a reader saw while {RANKS} imports ran: {seen:?}");

    for n in &seen {
        assert!(
            n % per_unit == 0 && *n <= per_unit * RANKS as u64,
            "a reader saw {n} rows: not whole units of {per_unit}"
        );
    }
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "units disappeared while others committed: {seen:?}");
    assert_eq!(count(&dst), Some(per_unit * RANKS as u64));

    let back = tmp.path().join("back");
    cli::export(&dst, &back);
    assert_same_tree(&src, &back);
}

/// `SELECT count(*) FROM dump` through the CLI; `None` when the command fails (no dataset yet).
fn count(dst: &Path) -> Option<u64> {
    let dst = dst.to_string_lossy().into_owned();
    let out = cli::probelake(["sql", &dst, "-c", "SELECT count(*) AS n FROM dump", "--format", "csv", "-q"]);
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout).lines().nth(1)?.parse().ok()
}
