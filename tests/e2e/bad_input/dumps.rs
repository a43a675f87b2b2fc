//! Hostile msprobe files and trees given to `import` (and to `compare`, which reads them in
//! place). A file that is not what msprobe writes is either refused (clear error, dataset
//! unchanged) or kept exactly: imported, it exports back byte for byte. Nothing in between.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::{
    assert_clear_error, assert_refused, assert_unchanged, copy_tree, os, reads_everything, run_in, state, tree, GOOD,
};
use crate::cli;

/// A sandbox with a dataset `ds` holding the good unit step0/rank0, and a copy of it to put
/// back after a hostile import was (rightly) accepted.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let good = tree(dir.path(), "good", GOOD.as_bytes());
        cli::import(&good, &dir.path().join("ds"));
        copy_tree(&dir.path().join("ds"), &dir.path().join(".pristine"));
        Self { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Imports a unit made of `files` into `ds`. Returns whether it was accepted; refused, it
    /// must leave the sandbox as it was; accepted, it must export to the same bytes.
    fn refused_or_kept(&self, name: &str, files: &[(&str, &[u8])]) -> bool {
        let src = self.path().join(format!("src-{name}"));
        let unit = src.join("step0/rank0");
        std::fs::create_dir_all(&unit).expect("mkdir");
        for (file, bytes) in files {
            std::fs::write(unit.join(file), bytes).expect("write");
        }
        let before = state(self.path());
        let out = run_in(self.path(), [OsStr::new("import"), src.as_os_str(), OsStr::new("ds"), OsStr::new("-q")]);
        let accepted = out.status.success();
        if accepted {
            let back = self.path().join("back");
            cli::export(&self.path().join("ds"), &back);
            for (file, bytes) in files {
                let got = std::fs::read(back.join("step0/rank0").join(file)).unwrap_or_default();
                assert!(got == *bytes, "{name}: {file} was imported but exports differently");
            }
            std::fs::remove_dir_all(&back).expect("rm back");
            std::fs::remove_dir_all(self.path().join("ds")).expect("rm ds");
            copy_tree(&self.path().join(".pristine"), &self.path().join("ds"));
        } else {
            assert_clear_error(name, &out, &[]);
            assert_unchanged(name, &before, &state(self.path()));
        }
        std::fs::remove_dir_all(&src).expect("rm src");
        accepted
    }
}

/// `(start, end, kind)` of every JSON value of `text` but the outermost (msprobe's dialect:
/// `NaN` and `Infinity` are numbers). `text` is known good.
fn value_spans(text: &[u8]) -> Vec<(usize, usize, &'static str)> {
    fn ws(b: &[u8], mut i: usize) -> usize {
        while b[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    }
    fn string_end(b: &[u8], mut i: usize) -> usize {
        i += 1;
        while b[i] != b'"' {
            i += if b[i] == b'\\' { 2 } else { 1 };
        }
        i + 1
    }
    fn value(b: &[u8], i: usize, out: &mut Vec<(usize, usize, &'static str)>) -> usize {
        let (end, kind) = match b[i] {
            open @ (b'{' | b'[') => {
                let close = if open == b'{' { b'}' } else { b']' };
                let mut j = ws(b, i + 1);
                while b[j] != close {
                    if open == b'{' {
                        j = ws(b, ws(b, string_end(b, j)) + 1);
                    }
                    j = ws(b, value(b, j, out));
                    if b[j] == b',' {
                        j = ws(b, j + 1);
                    }
                }
                (j + 1, if open == b'{' { "object" } else { "array" })
            }
            b'"' => (string_end(b, i), "string"),
            first => {
                let len = b[i..].iter().position(|c| b",]} \n\r\t".contains(c)).unwrap_or(b.len() - i);
                (i + len, if matches!(first, b'n' | b't' | b'f') { "literal" } else { "number" })
            }
        };
        out.push((i, end, kind));
        end
    }
    let mut out = Vec::new();
    value(text, ws(text, 0), &mut out);
    out.pop(); // the document itself, pushed last
    out
}

#[test]
fn every_value_of_the_wrong_type_is_refused_or_kept_exactly() {
    let sandbox = Sandbox::new();
    let spans = value_spans(GOOD.as_bytes());
    assert!(spans.len() > 20, "{} values found", spans.len());
    let (mut refused, mut kept) = (0, 0);
    for (start, end, kind) in spans {
        for replacement in ["\"x\"", "1.5", "null", "true", "[]", "{}", "[1, \"a\"]", "{\"k\": NaN}"] {
            if &GOOD[start..end] == replacement {
                continue;
            }
            let dump = format!("{}{replacement}{}", &GOOD[..start], &GOOD[end..]);
            let name = format!("{kind}-at-{start}-as-{replacement}");
            if sandbox.refused_or_kept(&name, &[("dump.json", dump.as_bytes())]) {
                kept += 1;
            } else {
                refused += 1;
            }
        }
    }
    eprintln!("wrong types: {refused} refused, {kept} kept exactly");
    assert!(refused > 50 && kept > 0, "{refused} refused, {kept} kept");
}

#[test]
fn odd_tokens_duplicate_keys_and_bad_utf8_are_refused_or_kept_exactly() {
    let sandbox = Sandbox::new();
    let replace = |from: &str, to: &str| {
        assert!(GOOD.contains(from), "{from}");
        GOOD.replacen(from, to, 1).into_bytes()
    };
    let mut utf8_in_value = GOOD.as_bytes().to_vec();
    let at = GOOD.find("torch.float32").expect("dtype");
    utf8_in_value.splice(at..at + 5, [0xff, 0xfe, 0xc0, 0x80, b'x']);
    let mut utf8_in_key = GOOD.as_bytes().to_vec();
    let at = GOOD.find("alpha").expect("kwarg");
    utf8_in_key.splice(at..at + 2, [0xed, 0xa0]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("nan-document", b"NaN".to_vec()),
        ("nan-data", replace("\"data\": {", "\"data\": NaN, \"x\": {")),
        ("nan-in-shape", replace("[\n      4\n     ]", "[NaN, -Infinity]")),
        ("nan-suffix", replace("NaN", "NaNx")),
        ("minus-nan", replace("NaN", "-NaN")),
        ("plus-infinity", replace("NaN", "+Infinity")),
        ("lower-nan", replace("NaN", "nan")),
        ("infinity-suffix", replace("NaN", "Infinityy")),
        ("nan-bool", replace("\"requires_grad\": false", "\"requires_grad\": NaN")),
        ("nan-string", replace("\"torch.float32\"", "\"NaN\"")),
        ("huge-number", replace("1.0", &"9".repeat(5000))),
        ("duplicate-top", replace("\"level\": \"L1\"", "\"level\": \"L1\", \"level\": \"L0\"")),
        ("duplicate-stat", replace("\"Min\": 1.0", "\"Min\": 1.0, \"Min\": 2.0")),
        ("duplicate-kwarg", replace("\"alpha\": {", "\"alpha\": 1, \"alpha\": {")),
        ("duplicate-data", replace("\"data\": {", "\"data\": {}, \"data\": {")),
        ("bad-utf8-value", utf8_in_value),
        ("bad-utf8-key", utf8_in_key),
        ("lone-surrogate", replace("torch.float32", "\\ud800")),
        ("escaped-nul", replace("torch.float32", "a\\u0000b")),
        ("bom", [b"\xef\xbb\xbf".as_slice(), GOOD.as_bytes()].concat()),
        ("empty", Vec::new()),
        ("spaces", b"   \n\t ".to_vec()),
        ("array", b"[]".to_vec()),
        ("string", b"\"data\"".to_vec()),
        ("empty-object", b"{}".to_vec()),
        ("empty-data", b"{\"data\": {}}".to_vec()),
        ("json-lines", [GOOD.as_bytes(), b"\n", GOOD.as_bytes()].concat()),
        ("trailing-comma", replace("\"Norm\": 3.0,", "\"Norm\": 3.0,,")),
        ("comment", replace("\"Min\": 1.0,", "\"Min\": 1.0, // why\n")),
    ];
    let mut refused = 0;
    for (name, dump) in &cases {
        refused += usize::from(!sandbox.refused_or_kept(name, &[("dump.json", dump)]));
    }
    eprintln!("odd tokens: {refused} of {} refused, the rest kept exactly", cases.len());
    assert!(refused > cases.len() / 2);
}

#[test]
fn hundred_megabyte_strings_are_refused_or_kept_exactly() {
    let sandbox = Sandbox::new();
    let big = "a".repeat(100 << 20);
    // A long API name becomes a long partition value; a long dtype, a long cell; a long
    // string where a number belongs, an error message that must stay short.
    let cases = [
        ("long-api", GOOD.replacen("Torch.add.0.forward", &format!("{big}.add.0.forward"), 1)),
        ("long-dtype", GOOD.replacen("torch.float32", &big, 1)),
        ("long-wrong-stat", GOOD.replacen("\"Min\": 1.0", &format!("\"Min\": \"{big}\""), 1)),
    ];
    for (name, dump) in cases {
        sandbox.refused_or_kept(name, &[("dump.json", dump.as_bytes())]);
    }
}

#[test]
fn cuts_through_dump_stack_and_construct_files_are_refused_or_kept_exactly() {
    let sandbox = Sandbox::new();
    let synth = sandbox.path().join("synth");
    cli::ok([OsStr::new("synth"), synth.as_os_str(), OsStr::new("--layers"), OsStr::new("1"), OsStr::new("-q")]);
    let unit = synth.join("step_1/actor_update/step0/rank0");
    let read = |f: &str| std::fs::read(unit.join(f)).expect("synth file");
    let (dump, stack, construct) = (read("dump.json"), read("stack.json"), read("construct.json"));
    for cut in 0..8 {
        let at = |bytes: &[u8]| bytes.len() * cut / 8 + usize::from(cut > 0);
        let cut_dump = &dump[..at(&dump)];
        assert!(
            !sandbox.refused_or_kept(&format!("dump-{cut}"), &[("dump.json", cut_dump)]),
            "dump.json cut at {cut}/8"
        );
        let cut_stack = &stack[..at(&stack)];
        sandbox.refused_or_kept(&format!("stack-{cut}"), &[("dump.json", &dump), ("stack.json", cut_stack)]);
        let cut_construct = &construct[..at(&construct) - usize::from(cut > 0)];
        sandbox
            .refused_or_kept(&format!("construct-{cut}"), &[("dump.json", &dump), ("construct.json", cut_construct)]);
    }
    for (name, bytes) in [
        ("array", b"[]".as_slice()),
        ("number-values", b"{\"a\": 5}"),
        ("nested-nan", b"{\"0\": [[\"x\"], [NaN]]}"),
        ("bad-utf8", b"{\"0\": [[\"\xff\"], []]}"),
        ("deep", &[b'['; 20_000]),
    ] {
        sandbox.refused_or_kept(&format!("stack-{name}"), &[("dump.json", &dump), ("stack.json", bytes)]);
        sandbox.refused_or_kept(&format!("construct-{name}"), &[("dump.json", &dump), ("construct.json", bytes)]);
    }
}

#[test]
fn refusals_name_the_file_and_the_place() {
    let sandbox = Sandbox::new();
    let deep = "[".repeat(10_000) + &"]".repeat(10_000);
    let cases: Vec<(&str, Vec<u8>, Vec<&str>)> = vec![
        ("truncated", GOOD.as_bytes()[..GOOD.len() / 2].to_vec(), vec!["dump.json", "byte", "line"]),
        ("not-msprobe", br#"{"name": "x", "items": [1, 2]}"#.to_vec(), vec!["dump.json", "no `data` object"]),
        ("wrong-shape", GOOD.replace("[\n      4\n     ]", "\"4\"").into_bytes(), vec!["dump.json", "shape", "byte"]),
        ("wrong-stat", GOOD.replace("\"Min\": 1.0", "\"Min\": \"one\"").into_bytes(), vec!["Min", "byte"]),
        (
            "wrong-entry",
            GOOD.replace("\"Torch.add.0.forward\": {", "\"Torch.add.0.forward\": 5, \"x\": {").into_bytes(),
            vec!["must be an object"],
        ),
        ("deep", format!("{{\"data\": {{\"a\": {{\"input_args\": {deep}}}}}}}").into_bytes(), vec!["nesting deeper"]),
        ("binary", vec![0x89, b'P', b'N', b'G', 0, 0xff, 0xfe, 1, 2, 3], vec!["dump.json", "byte"]),
        (
            "duplicate",
            GOOD.replace("\"Torch.add.0.forward\": {", "\"Torch.add.0.forward\": {}, \"Torch.add.0.forward\": {")
                .into_bytes(),
            vec!["twice"],
        ),
    ];
    for (name, bytes, expect) in cases {
        tree(sandbox.path(), name, &bytes);
        assert_refused(sandbox.path(), &os(&["import", name, "ds", "-q"]), &expect);
        // `compare` reads two runs of msprobe files in place (the sandbox's `good` tree is the
        // other): the same refusal, as a file or a tree, on either side, and no result file.
        let (bad, good) = (format!("{name}/step0/rank0/dump.json"), "good/step0/rank0/dump.json");
        for (target, golden) in [(bad.as_str(), good), (good, bad.as_str()), (name, "good"), ("good", name)] {
            assert_refused(sandbox.path(), &os(&["compare", target, golden, "-o", "out", "-q"]), &expect);
        }
    }
    assert_refused(sandbox.path(), &os(&["import", "no-such-folder", "ds"]), &["no-such-folder"]);
    // A good file beside a bad one: nothing of either is committed.
    tree(sandbox.path(), "mixed", GOOD.as_bytes());
    let bad = sandbox.path().join("mixed/step1/rank0");
    std::fs::create_dir_all(&bad).expect("mkdir");
    std::fs::write(bad.join("dump.json"), &GOOD.as_bytes()[..100]).expect("write");
    assert_refused(sandbox.path(), &os(&["import", "mixed", "ds"]), &["step1/rank0/dump.json"]);
}

#[test]
fn links_loops_folders_fifos_and_unreadable_files_never_hang_or_half_import() {
    use std::os::unix::fs::symlink;
    let sandbox = Sandbox::new();
    let root = sandbox.path();
    let rank = |name: &str| {
        let dir = root.join(name).join("step0/rank0");
        std::fs::create_dir_all(&dir).expect("mkdir");
        dir
    };
    // A loop below a good unit: links are not followed, so the unit imports and nothing hangs.
    let looped = rank("looped");
    std::fs::write(looped.join("dump.json"), GOOD).expect("write");
    symlink("../..", looped.join("up")).expect("link");
    let out = run_in(root, ["import", "looped", "looped-ds", "-q"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    symlink("self", root.join("self")).expect("link");
    assert_refused(root, &os(&["import", "self", "ds"]), &["self"]);
    symlink("missing.json", rank("dangling").join("dump.json")).expect("link");
    assert_refused(root, &os(&["import", "dangling", "ds"]), &["dangling"]);
    std::fs::create_dir_all(rank("folder").join("dump.json")).expect("mkdir");
    assert_refused(root, &os(&["import", "folder", "ds"]), &["folder"]);
    let fifo = rank("fifo").join("dump.json");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo").success());
    assert_refused(root, &os(&["import", "fifo", "ds"]), &["fifo"]);
    // One file given by name that never ends.
    symlink("/dev/zero", root.join("zero.json")).expect("link");
    assert_refused(root, &os(&["import", "zero.json", "ds", "--step", "0", "--rank", "0"]), &["zero.json"]);
    if reads_everything() {
        eprintln!("note: running as root, which reads any file; the unreadable-file case is skipped");
    } else {
        let unreadable = rank("unreadable").join("dump.json");
        std::fs::write(&unreadable, GOOD).expect("write");
        std::fs::set_permissions(&unreadable, std::os::unix::fs::PermissionsExt::from_mode(0o000)).expect("chmod");
        assert_refused(root, &os(&["import", "unreadable", "ds"]), &["unreadable/step0/rank0/dump.json", "denied"]);
    }
}

#[test]
fn stage_names_with_slashes_dots_percents_spaces_and_unicode_stay_inside_and_round_trip() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    let dump = tree(root, "one", GOOD.as_bytes()).join("step0/rank0/dump.json");
    let stages = ["../../escape", "a/b", "/abs", "%2e%2e", "100%", "a b", "ünï €", "..", ".", "tab\there", "CON"];
    for stage in stages {
        let out = run_in(
            root,
            [OsStr::new("import"), dump.as_os_str(), OsStr::new("ds"), OsStr::new("--stage"), OsStr::new(stage)],
        );
        assert!(out.status.success(), "--stage {stage:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // Nothing outside the dataset; inside it, only the tables and the metadata folder.
    let outside: Vec<PathBuf> = state(root).into_iter().map(|(p, _)| p).filter(|p| !p.starts_with("ds")).collect();
    assert!(outside.iter().all(|p| p.starts_with("one")), "written outside the dataset: {outside:?}");
    for (path, _) in state(&root.join("ds")) {
        let top = path.components().next().expect("a component").as_os_str().to_string_lossy().into_owned();
        assert!(["_probelake", "dump", "stack", "source", "construct", "tensor"].contains(&top.as_str()), "{path:?}");
        assert!(path.components().all(|c| matches!(c, std::path::Component::Normal(_))), "{path:?}");
    }
    let ds = root.join("ds");
    let query = "SELECT DISTINCT stage FROM dump ORDER BY stage";
    let out = cli::ok([
        OsStr::new("sql"),
        ds.as_os_str(),
        OsStr::new("-c"),
        OsStr::new(query),
        OsStr::new("--format"),
        OsStr::new("ndjson"),
    ]);
    let got: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).expect("ndjson")["stage"].as_str().expect("a stage").into()
        })
        .collect();
    let mut want: Vec<String> = stages.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(got, want);
    // All stages at once would put every unit's file on one path: refused, even with --force.
    let err = assert_refused(root, &os(&["export", "ds", "all-back"]), &["two units would write this same file"]);
    assert!(!err.contains("--layout"), "an export error gets no import hint: {err}");
    assert_refused(root, &os(&["export", "ds", "all-back", "--force"]), &["two units would write this same file"]);
    for stage in stages {
        let back = root.join("back");
        cli::ok([OsStr::new("export"), ds.as_os_str(), back.as_os_str(), OsStr::new("--stage"), OsStr::new(stage)]);
        assert_eq!(std::fs::read(back.join("step0/rank0/dump.json")).expect("exported"), GOOD.as_bytes(), "{stage}");
        std::fs::remove_dir_all(&back).expect("rm");
    }
    // verl folders with such names: the tree comes back the same.
    let verl = root.join("verl");
    for stage in ["a b", "ünï %2F..", "100%", "x=y"] {
        let dir = verl.join("step_1").join(stage).join("step0/rank0");
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("dump.json"), GOOD).expect("write");
    }
    cli::import(&verl, &root.join("verl-ds"));
    cli::export(&root.join("verl-ds"), &root.join("verl-back"));
    crate::fixtures::assert_same_tree(&verl, &root.join("verl-back"));
}
