//! Datasets on S3: every command against a real S3-compatible server (moto), byte-exact round
//! trips, a server frozen in the middle of an import, and the errors users meet first.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use object_store::{ObjectStore, ObjectStoreExt};
use probelake_synth::{write_run, SynthSpec};

use crate::cli;
use crate::fixtures::{assert_same_bytes, files_below, runs};
use crate::moto::Moto;
use crate::roundtrip::is_carried;

fn ok(out: Output, what: &str) -> Output {
    assert!(out.status.success(), "{what} failed ({}):\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    out
}

fn count_rows(run: &dyn Fn(&[&str]) -> Output, dataset: &str) -> String {
    let out = ok(
        run(&["sql", "--run", &format!("r={dataset}"), "--format", "csv", "-c", "SELECT count(*) AS n FROM dump"]),
        "sql count",
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn assert_same_tree(want_root: &Path, got_root: &Path) -> usize {
    let want: Vec<_> = files_below(want_root).into_iter().filter(|r| is_carried(r)).collect();
    assert_eq!(want, files_below(got_root), "{}: exported file list differs", want_root.display());
    for rel in &want {
        let a = std::fs::read(want_root.join(rel)).expect("read original");
        let b = std::fs::read(got_root.join(rel)).expect("read exported");
        assert_same_bytes(&want_root.join(rel), &a, &b);
    }
    want.len()
}

fn synth_pair(dir: &Path) -> (PathBuf, PathBuf) {
    let base = dir.join("base");
    let bug = dir.join("bug");
    write_run(&SynthSpec::demo(), &base).expect("synth base");
    write_run(&SynthSpec { attention_scale_bug: Some((1, 1.01)), ..SynthSpec::demo() }, &bug).expect("synth bug");
    (base, bug)
}

#[test]
fn every_fixture_run_round_trips_through_s3() {
    let Some(moto) = Moto::start() else { return };
    let runs = runs();
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut files = 0;
    for (i, run) in runs.iter().enumerate() {
        let url = moto.url(&format!("runs/{i}"));
        let local = tmp.path().join(format!("local{i}"));
        cli::import(run, &local);
        ok(moto.run([Path::new("import"), run, Path::new(&url), Path::new("-q")]), "import to s3");
        let on_s3 = count_rows(&|args| moto.run(args), &url);
        let here = count_rows(&|args| cli::probelake(args), &local.to_string_lossy());
        assert_eq!(on_s3, here, "{}: row count on S3 differs from local", run.display());
        let out = tmp.path().join(format!("out{i}"));
        ok(moto.run([Path::new("export"), Path::new(&url), &out, Path::new("-q")]), "export from s3");
        files += assert_same_tree(run, &out);
    }
    if !runs.is_empty() {
        assert!(files > 100, "only {files} files compared");
        eprintln!("{} runs, {files} files identical after import to and export from S3", runs.len());
    }
}

#[test]
fn compare_between_s3_and_local_equals_local_compare() {
    let Some(moto) = Moto::start() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let (base, bug) = synth_pair(&tmp.path().join("src"));
    let (local_base, local_bug) = (tmp.path().join("base"), tmp.path().join("bug"));
    cli::import(&base, &local_base);
    cli::import(&bug, &local_bug);
    let s3_base = moto.url("base");
    ok(moto.run([Path::new("import"), &base, Path::new(&s3_base), Path::new("-q")]), "import to s3");
    let (out_local, out_s3) = (tmp.path().join("cmp-local"), tmp.path().join("cmp-s3"));
    // Exit code 1 means "they differ", which they do.
    let a = moto.run([Path::new("compare"), &local_bug, &local_base, Path::new("-o"), &out_local, Path::new("-q")]);
    let b =
        moto.run([Path::new("compare"), &local_bug, Path::new(&s3_base), Path::new("-o"), &out_s3, Path::new("-q")]);
    assert_eq!(a.status.code(), b.status.code(), "{}", String::from_utf8_lossy(&b.stderr));
    let (fa, fb) = (files_below(&out_local), files_below(&out_s3));
    assert!(!fa.is_empty() && fa.len() == fb.len(), "{fa:?} vs {fb:?}");
    for (ra, rb) in fa.iter().zip(&fb) {
        // File names carry a timestamp; the folders and contents must match.
        assert_eq!(ra.parent(), rb.parent());
        let (ca, cb) = (std::fs::read(out_local.join(ra)).expect("csv"), std::fs::read(out_s3.join(rb)).expect("csv"));
        assert_same_bytes(ra, &ca, &cb);
    }
}

/// Lists every object under `prefix` of the test bucket.
fn objects(moto: &Moto, prefix: &str) -> Vec<String> {
    let lake = probelake_format::storage::open(&moto.url(prefix), &moto.options()).expect("open");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        lake.store()
            .list(Some(lake.root()))
            .map_ok(|m| m.location.to_string())
            .try_collect::<Vec<_>>()
            .await
            .unwrap_or_default()
    })
}

#[test]
fn a_server_frozen_mid_import_leaves_no_partial_unit_and_the_rerun_succeeds() {
    let Some(moto) = Moto::start() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src");
    // Enough units that the import is still uploading when the server freezes.
    let spec = SynthSpec { global_steps: (1..=6).collect(), ranks: 2, ..SynthSpec::demo() };
    write_run(&spec, &src).expect("synth");
    let url = moto.url("frozen");
    let import = moto
        .command([Path::new("import"), &src, Path::new(&url), Path::new("-q")])
        .args(["--s3-timeout", "2", "--s3-retries", "1"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("import starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    while objects(&moto, "frozen").is_empty() {
        assert!(Instant::now() < deadline, "the import wrote nothing within 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    moto.pause();
    let out = import.wait_with_output().expect("import ends");
    moto.resume();
    assert_eq!(out.status.code(), Some(2), "the import must fail while the server is frozen");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "one line expected:\n{stderr}");
    assert!(stderr.contains("s3://probelake-test/frozen"), "{stderr}");
    assert!(stderr.contains("did not answer in time"), "{stderr}");
    assert!(!stderr.contains(&moto.secret), "{stderr}");

    // No unit is visible, however far the import got: every commit record names only files
    // that exist, and none was written before all files were staged.
    let left = objects(&moto, "frozen");
    assert!(!left.iter().any(|o| o.contains("_probelake/commits/")), "a unit was committed: {left:?}");
    let info =
        moto.run(["sql", "--run", &format!("r={url}"), "--format", "csv", "-c", "SELECT count(*) AS n FROM dump"]);
    if info.status.success() {
        assert_eq!(String::from_utf8_lossy(&info.stdout).trim(), "n\n0");
    }

    ok(moto.run([Path::new("import"), &src, Path::new(&url), Path::new("-q")]), "re-run of the import");
    let out_dir = tmp.path().join("out");
    ok(moto.run([Path::new("export"), Path::new(&url), &out_dir, Path::new("-q")]), "export");
    assert!(assert_same_tree(&src, &out_dir) > 0);
}

fn one_line_error(out: &Output, url: &str, advice: &str, secrets: &[&str]) {
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "one line expected:\n{stderr}");
    assert!(stderr.contains(url), "{stderr} does not name {url}");
    assert!(stderr.contains(advice), "{stderr} does not say `{advice}`");
    for secret in secrets {
        assert!(!stderr.contains(secret), "{stderr} shows a secret");
    }
}

#[test]
fn wrong_credentials_missing_bucket_and_dead_endpoint_each_say_what_to_check() {
    let Some(moto) = Moto::start() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src");
    write_run(&SynthSpec::demo(), &src).expect("synth");
    let url = moto.url("creds");
    ok(moto.run([Path::new("import"), &src, Path::new(&url), Path::new("-q")]), "import");

    let wrong_secret = "wrong-secret-0123456789";
    let out = moto.command(["info", &url]).env("AWS_SECRET_ACCESS_KEY", wrong_secret).output().expect("runs");
    one_line_error(&out, &url, "access denied", &[wrong_secret, &moto.secret]);

    let wrong_key = "AKIANOSUCHKEY0000000";
    let out = moto.command(["info", &url]).env("AWS_ACCESS_KEY_ID", wrong_key).output().expect("runs");
    one_line_error(&out, &url, "access denied", &[wrong_key, &moto.secret]);

    let missing = "s3://no-such-bucket/run";
    let out = moto.run([Path::new("import"), &src, Path::new(missing), Path::new("-q")]);
    one_line_error(&out, missing, "bucket does not exist", &[&moto.secret]);

    let dead = format!("http://127.0.0.1:{}", {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    });
    let out = moto.command(["info", &url, "--s3-retries", "1"]).env("AWS_ENDPOINT", &dead).output().expect("runs");
    one_line_error(&out, &url, "cannot reach the storage endpoint", &[&moto.secret]);
}

#[test]
fn large_files_are_uploaded_in_parts() {
    let Some(moto) = Moto::start() else { return };
    let options = probelake_format::StorageOptions { multipart_threshold: 5 * 1024 * 1024, ..moto.options() };
    let lake = probelake_format::storage::open(&moto.url("multipart"), &options).expect("open");
    // 12 MiB of noise: three parts of 5, 5 and 2 MiB.
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let bytes: Vec<u8> = (0..12 * 1024 * 1024)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    let unit = probelake_format::Unit { step: 0, stage: "s".into(), rank: 0 };
    let file = probelake_format::lake::EncodedFile {
        table: probelake_format::Table::Source,
        api: None,
        rows: 0,
        bytes: bytes.clone(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let stored = lake.put_encoded(&unit, file).await.expect("multipart upload");
        let path = object_store::path::Path::parse(format!("{}/{}", lake.root(), stored.path)).expect("path");
        let got = lake.store().get(&path).await.expect("get");
        let got = got.bytes().await.expect("bytes");
        assert_eq!(got.len(), bytes.len());
        assert!(got.as_ref() == bytes.as_slice(), "the parts were not joined in order");
    });
}
