//! Many writers, one dataset: one `probelake import` process per rank commits its unit into the
//! same dataset at the same time, while a reader queries it; the reader only ever sees whole
//! units, and at the end every rank's unit is there and exports byte for byte. Once on a local
//! folder, once on S3 (moto).

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::cli;
use crate::fixtures::assert_same_tree;
use crate::moto::Moto;

const RANKS: usize = 6;

/// Where the dataset lives, and how a command reaches it.
#[derive(Clone)]
struct Target {
    dst: String,
    env: Vec<(&'static str, String)>,
}

impl Target {
    fn command<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(&self, args: I) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_probelake"));
        command.args(args);
        crate::moto::with_only(&mut command, self.env.clone());
        command
    }

    /// `SELECT count(*) FROM dump`; `None` when the command fails (no dataset yet).
    fn count(&self) -> Option<u64> {
        let query = ["sql", &self.dst, "-c", "SELECT count(*) AS n FROM dump", "--format", "csv", "-q"];
        let out = self.command(query).output().expect("sql runs");
        if !out.status.success() {
            return None;
        }
        String::from_utf8_lossy(&out.stdout).lines().nth(1)?.parse().ok()
    }
}

#[test]
fn one_import_per_rank_at_once_and_readers_see_whole_units() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dst = tmp.path().join("lake").to_string_lossy().into_owned();
    many_writers_one_dataset(tmp.path(), &Target { dst, env: Vec::new() });
}

#[test]
fn one_import_per_rank_at_once_on_s3_and_readers_see_whole_units() {
    let Some(moto) = Moto::start() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    many_writers_one_dataset(tmp.path(), &Target { dst: moto.url("concurrent"), env: moto.env() });
}

fn many_writers_one_dataset(tmp: &Path, target: &Target) {
    let ranks = RANKS.to_string();
    let args = ["--layout", "msprobe", "--steps", "1", "--layers", "24", "--ranks", ranks.as_str(), "-q"];
    let src = tmp.join("tree");
    cli::ok([Path::new("synth"), &src].into_iter().map(Path::as_os_str).chain(args.iter().map(|a| a.as_ref())));

    // The leaves of one rank's unit (every rank runs the same ops on other tokens).
    let one = tmp.join("one");
    cli::import(&src.join("step0/rank0"), &one);
    let per_unit: u64 = Target { dst: one.to_string_lossy().into_owned(), env: Vec::new() }.count().expect("a count");
    assert!(per_unit > 0);

    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (target, done) = (target.clone(), Arc::clone(&done));
        std::thread::spawn(move || {
            let (mut seen, mut failures) = (Vec::new(), 0);
            while !done.load(Ordering::SeqCst) {
                match target.count() {
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
            let unit = src.join(format!("step0/rank{r}"));
            target
                .command([OsStr::new("import"), unit.as_os_str(), OsStr::new(&target.dst), OsStr::new("-q")])
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
    assert_eq!(target.count(), Some(per_unit * RANKS as u64));

    let back = tmp.join("back");
    let out =
        target.command([OsStr::new("export"), OsStr::new(&target.dst), back.as_os_str(), OsStr::new("-q")]).output();
    assert!(out.expect("export runs").status.success());
    assert_same_tree(&src, &back);
}
