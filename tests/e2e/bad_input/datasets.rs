//! Damaged datasets given to every command that reads one: each refuses with an error that
//! names the damaged file, writes nothing, and deletes nothing. Commands that never open the
//! damaged part (`info` and `vacuum` do not read data files) may succeed, but change nothing.

use std::path::Path;

use super::{assert_clear_error, assert_unchanged, copy_tree, reads_everything, run_in, state};
use crate::cli;

/// Damage done to the dataset `d`, and whether it is in a data file (which only the commands
/// that read rows notice).
struct Damage {
    name: &'static str,
    in_data_file: bool,
    apply: fn(&Path) -> String,
}

/// The first `dump` file of the first unit, relative to the dataset: the table every reading
/// command needs (the target's `stack` rows, say, are not read for a golden run).
fn first_data_file(d: &Path) -> String {
    data_file_of(&first_record(d))
}

/// The dump file of the last unit: damage there is found only after earlier units compared.
fn last_data_file(d: &Path) -> String {
    let mut records: Vec<_> = crate::fixtures::files_below(&d.join("_probelake/commits"));
    records.sort();
    data_file_of(&d.join("_probelake/commits").join(records.last().expect("a commit record")))
}

fn data_file_of(record: &Path) -> String {
    let record = std::fs::read_to_string(record).expect("a commit record");
    let record: serde_json::Value = serde_json::from_str(&record).expect("json");
    let files = record["files"].as_array().expect("files");
    let dump = files.iter().find(|f| f["table"] == "dump").expect("a dump file");
    dump["path"].as_str().expect("a path").to_string()
}

fn first_record(d: &Path) -> std::path::PathBuf {
    let mut records: Vec<_> = crate::fixtures::files_below(&d.join("_probelake/commits"));
    records.sort();
    d.join("_probelake/commits").join(&records[0])
}

fn rewrite(path: &Path, edit: impl FnOnce(String) -> String) {
    let text = std::fs::read_to_string(path).expect("read");
    std::fs::write(path, edit(text)).expect("write");
}

/// Keeps the first `1/fraction` of the file at `path`.
fn cut(path: &Path, fraction: usize) {
    let bytes = std::fs::read(path).expect("read");
    std::fs::write(path, &bytes[..bytes.len() / fraction]).expect("write");
}

fn file_name(path: &Path) -> String {
    path.file_name().expect("a name").to_string_lossy().into_owned()
}

const DAMAGES: &[Damage] = &[
    Damage {
        name: "manifest cut short",
        in_data_file: false,
        apply: |d| {
            cut(&d.join("_probelake/manifest.json"), 2);
            "manifest.json".into()
        },
    },
    Damage {
        name: "manifest from a newer probelake",
        in_data_file: false,
        apply: |d| {
            rewrite(&d.join("_probelake/manifest.json"), |t| {
                t.replace("\"format_version\": 1", "\"format_version\": 99")
            });
            "upgrade probelake".into()
        },
    },
    Damage {
        name: "manifest not UTF-8",
        in_data_file: false,
        apply: |d| {
            std::fs::write(d.join("_probelake/manifest.json"), b"{\"format\": \"\xff\xfe\"}").expect("write");
            "manifest.json".into()
        },
    },
    Damage {
        name: "commit record cut short",
        in_data_file: false,
        apply: |d| {
            let r = first_record(d);
            cut(&r, 3);
            file_name(&r)
        },
    },
    Damage {
        name: "commit record naming a file outside its unit",
        in_data_file: false,
        apply: |d| {
            let r = first_record(d);
            let first = first_data_file(d);
            rewrite(&r, |t| t.replacen(&first, "../../../../etc/passwd", 1));
            "etc/passwd".into()
        },
    },
    Damage {
        name: "commit record of another unit",
        in_data_file: false,
        apply: |d| {
            let commits = d.join("_probelake/commits/step=0/stage=default");
            let other = std::fs::read(commits.join("rank=1.json")).expect("rank 1 record");
            std::fs::write(commits.join("rank=0.json"), other).expect("write");
            "rank=0.json".into()
        },
    },
    Damage {
        name: "data file cut short",
        in_data_file: true,
        apply: |d| {
            let f = d.join(first_data_file(d));
            cut(&f, 2);
            file_name(&f)
        },
    },
    Damage {
        // Every command must also undo what it wrote for the units before the damaged one
        // (compare writes each unit's result as soon as it is compared).
        name: "last unit's data file cut short",
        in_data_file: true,
        apply: |d| {
            let f = d.join(last_data_file(d));
            cut(&f, 2);
            file_name(&f)
        },
    },
    Damage {
        // The footer reads; a page in the middle does not decode. DataFusion's error for it
        // does not say which file, so the commands look for the file that fails.
        name: "data file's pages overwritten",
        in_data_file: true,
        apply: |d| {
            let f = d.join(first_data_file(d));
            let mut bytes = std::fs::read(&f).expect("read");
            // Everything between the leading magic and the footer (metadata, its length, magic).
            let tail = bytes.len() - 8;
            let footer_len = u32::from_le_bytes(bytes[tail..tail + 4].try_into().expect("4 bytes")) as usize;
            bytes[4..tail - footer_len].fill(0x7f);
            std::fs::write(&f, bytes).expect("write");
            file_name(&f)
        },
    },
    Damage {
        name: "data file missing",
        in_data_file: true,
        apply: |d| {
            let f = d.join(first_data_file(d));
            std::fs::remove_file(&f).expect("rm");
            file_name(&f)
        },
    },
    Damage {
        name: "data file replaced by a folder",
        in_data_file: true,
        apply: |d| {
            let f = d.join(first_data_file(d));
            std::fs::remove_file(&f).expect("rm");
            std::fs::create_dir(&f).expect("mkdir");
            file_name(&f)
        },
    },
    Damage {
        name: "data file of another format",
        in_data_file: true,
        apply: |d| {
            let f = d.join(first_data_file(d));
            std::fs::write(&f, b"PAR1 this is not parquet PAR1").expect("write");
            file_name(&f)
        },
    },
    Damage {
        name: "dataset is a file",
        in_data_file: false,
        apply: |d| {
            std::fs::remove_dir_all(d).expect("rm");
            std::fs::write(d, b"not a dataset").expect("write");
            "d".into()
        },
    },
    Damage {
        name: "dataset is a link loop",
        in_data_file: false,
        apply: |d| {
            std::fs::remove_dir_all(d).expect("rm");
            std::os::unix::fs::symlink("d", d).expect("link");
            "d".into()
        },
    },
    Damage {
        name: "no dataset here",
        in_data_file: false,
        apply: |d| {
            std::fs::remove_dir_all(d).expect("rm");
            std::fs::create_dir(d).expect("mkdir");
            // compare and divergence also take dump trees, so they say no dump is there either.
            "d: no ".into()
        },
    },
];

/// Every command that reads a dataset, with `d` in the place it reads from.
fn commands() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        ("info", vec!["info", "d"]),
        ("export", vec!["export", "d", "out"]),
        ("sql", vec!["sql", "d", "-c", "SELECT count(*), sum(max) FROM dump"]),
        ("sql --run", vec!["sql", "--run", "a=d", "--run", "b=good", "-c", "SELECT count(*), sum(max) FROM a.dump"]),
        ("compare as target", vec!["compare", "d", "good", "-o", "out"]),
        ("compare as golden", vec!["compare", "good", "d", "-o", "out"]),
        ("divergence", vec!["divergence", "d", "good", "--threshold", "0", "-o", "out.csv", "--format", "csv"]),
        ("plot trend", vec!["plot", "trend", "d", "--op", "Functional.linear.0.forward", "-o", "out"]),
        ("plot divergence", vec!["plot", "divergence", "d", "good", "-o", "out"]),
        ("vacuum", vec!["vacuum", "d", "--older-than", "0s"]),
        ("import into", vec!["import", "src", "d"]),
    ]
}

#[test]
fn every_command_refuses_a_damaged_dataset_and_changes_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    let synth = ["synth", "src", "--layout", "msprobe", "--steps", "1", "--ranks", "2", "--layers", "1", "-q"];
    assert!(run_in(root, synth).status.success());
    let good = root.join("good");
    cli::import(&root.join("src"), &good);
    let mut checked = 0;
    for damage in DAMAGES {
        let d = root.join("d");
        let _ = std::fs::remove_dir_all(&d);
        let _ = std::fs::remove_file(&d);
        copy_tree(&good, &d);
        let named = (damage.apply)(&d);
        for (command, args) in commands() {
            if (damage.in_data_file || damage.name == "no dataset here") && command == "import into" {
                // Importing the unit again is how a damaged data file is repaired, and an
                // empty folder is where a new dataset starts.
                continue;
            }
            let what = format!("{} / {command}", damage.name);
            let before = state(root);
            let out = run_in(root, &args);
            let reads_rows = !matches!(command, "info" | "vacuum");
            if out.status.success() {
                assert!(damage.in_data_file && !reads_rows, "{what}: succeeded");
            } else {
                assert_clear_error(&what, &out, &[named.as_str()]);
            }
            assert_unchanged(&what, &before, &state(root));
            checked += 1;
        }
    }
    eprintln!("{checked} command runs over {} kinds of damage", DAMAGES.len());
    if reads_everything() {
        eprintln!("note: running as root, which reads any file; the unreadable-dataset case is skipped");
    } else {
        let d = root.join("d");
        let _ = std::fs::remove_file(&d);
        copy_tree(&good, &d);
        let record = first_record(&d);
        std::fs::set_permissions(&record, std::os::unix::fs::PermissionsExt::from_mode(0o000)).expect("chmod");
        for (command, args) in commands() {
            let before = state(root);
            let out = run_in(root, &args);
            assert_clear_error(command, &out, &[file_name(&record).as_str()]);
            assert_unchanged(command, &before, &state(root));
        }
    }
}
