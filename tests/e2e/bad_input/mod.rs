//! Bad input, for every command: a clear error naming the file and position, an exit code
//! other than 0, no panic, nothing written outside the destination, and the destination
//! exactly as it was.
//!
//! - `dumps`: hostile msprobe files and trees given to `import` and `compare`;
//! - `datasets`: damaged datasets given to every command that reads one;
//! - `outputs`: a full disk and impossible output paths for every command that writes.
//!
//! Every case runs the real binary in a sandbox folder and compares the whole sandbox (files,
//! folders and links, not followed) before and after.

mod datasets;
mod dumps;
mod outputs;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A small dump.json with one of each kind of value msprobe writes.
pub const GOOD: &str = r#"{
 "task": "statistics",
 "level": "L1",
 "framework": "pytorch",
 "dump_data_dir": null,
 "data": {
  "Torch.add.0.forward": {
   "input_args": [
    {
     "type": "torch.Tensor",
     "dtype": "torch.float32",
     "shape": [
      4
     ],
     "Max": NaN,
     "Min": 1.0,
     "Mean": 2.0,
     "Norm": 3.0,
     "requires_grad": false
    },
    {
     "type": "int",
     "value": 2
    }
   ],
   "input_kwargs": {
    "alpha": {
     "type": "float",
     "value": 0.5
    }
   },
   "output": [
    null
   ]
  }
 }
}"#;

/// Writes `dump` as `step0/rank0/dump.json` under `root/name` and returns that folder.
pub fn tree(root: &Path, name: &str, dump: &[u8]) -> PathBuf {
    let dir = root.join(name).join("step0/rank0");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("dump.json"), dump).expect("write");
    root.join(name)
}

/// One entry of [`state`]: what is at a path, links not followed.
#[derive(Debug, PartialEq, Eq)]
pub enum Entry {
    Folder,
    File(Vec<u8>),
    Link(PathBuf),
    /// A FIFO, socket or device: never read (a FIFO would block).
    Special,
}

/// Everything below `root`, sorted: the state "unchanged" is checked against.
pub fn state(root: &Path) -> Vec<(PathBuf, Entry)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(PathBuf, Entry)>) {
        let Ok(read) = std::fs::read_dir(dir) else { return };
        for item in read.flatten() {
            let path = item.path();
            let rel = path.strip_prefix(root).expect("below root").to_path_buf();
            let Ok(kind) = item.file_type() else { continue };
            if kind.is_symlink() {
                out.push((rel, Entry::Link(std::fs::read_link(&path).unwrap_or_default())));
            } else if kind.is_dir() {
                out.push((rel, Entry::Folder));
                walk(root, &path, out);
            } else if kind.is_file() {
                out.push((rel, Entry::File(std::fs::read(&path).unwrap_or_default())));
            } else {
                out.push((rel, Entry::Special));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Runs `probelake ARGS` in `cwd`, killed after a minute: bad input must not hang it either.
pub fn run_in<I, S>(cwd: &Path, args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    run_command(Command::new(env!("CARGO_BIN_EXE_probelake")).args(args).current_dir(cwd))
}

/// Runs `command` to its end, or kills it after a minute and fails the test.
pub fn run_command(command: &mut Command) -> Output {
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("the command starts");
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("{command:?} still ran after a minute");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().expect("output")
}

/// Asserts `out` is a refusal as users should see one: exit code not 0 and not a panic's
/// 101, no panic or backtrace text, a short message that starts like every probelake error
/// and contains each of `expect`.
pub fn assert_clear_error(what: &str, out: &Output, expect: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    let code = out.status.code();
    assert!(code.is_some_and(|c| c != 0 && c != 101), "{what}: exit {:?} (signal or success)\n{err}", out.status);
    assert!(!err.contains("panicked") && !err.contains("RUST_BACKTRACE"), "{what}: a panic\n{err}");
    let is_error_line = |l: &str| l.starts_with("probelake: ") || l.starts_with("error: ");
    assert!(err.lines().any(is_error_line), "{what}: not a probelake error:\n{err}");
    assert!(err.len() < 8 * 1024, "{what}: a {} byte error message", err.len());
    for e in expect {
        assert!(err.contains(e), "{what}: expected {e:?} in:\n{err}");
    }
}

/// Runs `probelake ARGS` in `sandbox` and asserts a clear refusal that left every file below
/// `sandbox` as it was. Returns stderr.
pub fn assert_refused(sandbox: &Path, args: &[&OsStr], expect: &[&str]) -> String {
    let before = state(sandbox);
    let out = run_in(sandbox, args);
    let what = format!("probelake {}", args.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" "));
    assert_clear_error(&what, &out, expect);
    let after = state(sandbox);
    assert_unchanged(&what, &before, &after);
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts two [`state`]s are equal, naming the first path that differs.
pub fn assert_unchanged(what: &str, before: &[(PathBuf, Entry)], after: &[(PathBuf, Entry)]) {
    if before == after {
        return;
    }
    let paths = |s: &[(PathBuf, Entry)]| s.iter().map(|(p, _)| p.clone()).collect::<std::collections::BTreeSet<_>>();
    let (b, a) = (paths(before), paths(after));
    let added: Vec<_> = a.difference(&b).collect();
    let removed: Vec<_> = b.difference(&a).collect();
    let changed: Vec<_> =
        before.iter().filter(|(p, e)| after.iter().any(|(q, f)| p == q && e != f)).map(|(p, _)| p).collect();
    panic!("{what}: the sandbox changed: added {added:?}, removed {removed:?}, changed {changed:?}");
}

/// Copies the folder `from` to `to`, which must not exist.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir").flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// `args` as the `&[&OsStr]` that [`assert_refused`] takes.
pub fn os<'a>(args: &[&'a str]) -> Vec<&'a OsStr> {
    args.iter().map(|a| OsStr::new(*a)).collect()
}

/// Whether this process can read files whatever their mode (root): permission cases skip.
pub fn reads_everything() -> bool {
    let probe = std::env::temp_dir().join(format!("probelake-perm-{}", std::process::id()));
    let _ = std::fs::write(&probe, b"x");
    let _ = std::fs::set_permissions(&probe, std::os::unix::fs::PermissionsExt::from_mode(0o000));
    let readable = std::fs::read(&probe).is_ok();
    let _ = std::fs::remove_file(&probe);
    readable
}

#[test]
fn a_failed_import_into_a_new_folder_leaves_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    tree(tmp.path(), "bad", b"{\"data\": [");
    assert_refused(tmp.path(), &os(&["import", "bad", "new-ds"]), &["dump.json", "byte"]);
    assert!(!tmp.path().join("new-ds").exists());
}

#[test]
fn a_commit_failing_half_way_puts_back_the_units_committed_before_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let sandbox = tmp.path();
    tree(sandbox, "first", GOOD.as_bytes());
    let out = run_in(sandbox, ["import", "-q", "first", "ds"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let before = state(&sandbox.join("ds"));

    // Rank 0 again, changed, and a new rank 1, which commits after it. A folder where rank 1's
    // commit record goes makes its put fail, after rank 0's new record has landed.
    tree(sandbox, "second", GOOD.replace("0.5", "0.25").as_bytes());
    let rank1 = sandbox.join("second/step0/rank1");
    std::fs::create_dir_all(&rank1).expect("mkdir");
    std::fs::write(rank1.join("dump.json"), GOOD).expect("write");
    let blocker = sandbox.join("ds/_probelake/commits/step=0/stage=default/rank=1.json");
    std::fs::create_dir_all(&blocker).expect("mkdir");

    let out = run_in(sandbox, ["import", "second", "ds"]);
    assert_clear_error("import over a blocked commit", &out, &["rank=1.json"]);
    std::fs::remove_dir(&blocker).expect("rmdir");
    // Rank 0 has its first commit back and its new files are gone; rank 1's files, whose
    // record never landed, are what `vacuum` is for.
    let out = run_in(sandbox, ["vacuum", "-q", "--older-than", "0s", "ds"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_unchanged("a failed import, then vacuum", &before, &state(&sandbox.join("ds")));
}

#[test]
fn truncation_at_every_offset_is_an_error_never_a_panic() {
    // The library directly: running the binary thousands of times would be slow.
    for cut in 0..GOOD.len() {
        let arena = probelake_msprobe::json::Arena::new();
        let result = probelake_msprobe::json::parse(&GOOD.as_bytes()[..cut], &arena);
        assert!(result.is_err(), "a dump cut at {cut} parsed");
    }
}
