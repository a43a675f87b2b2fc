//! A real S3-compatible server for the tests: moto's `moto_server` (PyPI `moto[server]`) on
//! 127.0.0.1 at a free port, with request signing enforced, stopped by its pid when dropped.
//!
//! It comes from the venv the test command makes (`$PROBELAKE_TEST_VENV`, else `.venv` of the
//! clone); without one the S3 tests skip with a notice.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use probelake_format::storage::StorageOptions;

/// Creates the IAM user whose keys the tests sign with, and the bucket. moto checks signatures
/// only after its first `INITIAL_NO_AUTH_ACTION_COUNT` requests, which this script spends.
const SETUP: &str = r#"
import boto3, sys
ep, bucket = sys.argv[1], sys.argv[2]
kw = dict(endpoint_url=ep, region_name="us-east-1")
iam = boto3.client("iam", aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap", **kw)
iam.create_user(UserName="probelake")
iam.put_user_policy(UserName="probelake", PolicyName="all",
    PolicyDocument='{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}')
key = iam.create_access_key(UserName="probelake")["AccessKey"]
boto3.client("s3", aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"], **kw
    ).create_bucket(Bucket=bucket)
print(key["AccessKeyId"], key["SecretAccessKey"])
"#;

/// The bucket every server starts with.
pub const BUCKET: &str = "probelake-test";

/// A running moto server with a bucket and signing keys.
pub struct Moto {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// Access key id of the test user.
    pub key_id: String,
    /// Its secret.
    pub secret: String,
}

fn venv() -> PathBuf {
    match std::env::var_os("PROBELAKE_TEST_VENV") {
        Some(v) => PathBuf::from(v),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv"),
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

impl Moto {
    /// Starts a server, or returns `None` (after one notice) when moto is not installed. Under
    /// scripts/test-all.sh, which installs it ($PROBELAKE_TEST_VENV), a missing server fails.
    pub fn start() -> Option<Moto> {
        let venv = venv();
        let server = venv.join("bin/moto_server");
        if !server.exists() {
            assert!(
                std::env::var_os("PROBELAKE_TEST_VENV").is_none(),
                "{} not found, though PROBELAKE_TEST_VENV names that venv",
                server.display()
            );
            eprintln!("skipping: {} not found (scripts/test-all.sh installs moto[server] there)", server.display());
            return None;
        }
        let port = free_port();
        let child = Command::new(&server)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .env("INITIAL_NO_AUTH_ACTION_COUNT", "3")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moto_server starts");
        let mut moto =
            Moto { child, endpoint: format!("http://127.0.0.1:{port}"), key_id: String::new(), secret: String::new() };
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "moto_server did not listen on port {port} within 60 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        let out = Command::new(venv.join("bin/python"))
            .args(["-c", SETUP, &moto.endpoint, BUCKET])
            .output()
            .expect("the venv's python runs");
        assert!(out.status.success(), "moto setup failed: {}", String::from_utf8_lossy(&out.stderr));
        let keys = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut keys = keys.split_whitespace();
        moto.key_id = keys.next().expect("access key id").to_string();
        moto.secret = keys.next().expect("secret").to_string();
        Some(moto)
    }

    /// `s3://BUCKET/path`.
    pub fn url(&self, path: &str) -> String {
        format!("s3://{BUCKET}/{path}")
    }

    /// The environment a probelake command needs to reach this server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ACCESS_KEY_ID", self.key_id.clone()),
            ("AWS_SECRET_ACCESS_KEY", self.secret.clone()),
        ]
    }

    /// The same settings for the library.
    pub fn options(&self) -> StorageOptions {
        StorageOptions {
            endpoint: Some(self.endpoint.clone()),
            allow_http: Some(true),
            region: Some("us-east-1".into()),
            access_key_id: Some(self.key_id.clone()),
            secret_access_key: Some(self.secret.clone()),
            ..StorageOptions::default()
        }
    }

    /// A probelake command against this server (any `AWS_*` of the caller's removed).
    pub fn command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_probelake"));
        cmd.args(args);
        with_only(&mut cmd, self.env());
        cmd
    }

    /// Runs a probelake command against this server.
    pub fn run<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.command(args).output().expect("the probelake binary runs")
    }

    /// Freezes the server (SIGSTOP): connections are accepted by the kernel but never answered.
    pub fn pause(&self) {
        signal(self.child.id(), "-STOP");
    }

    /// Lets a frozen server go on (SIGCONT).
    pub fn resume(&self) {
        signal(self.child.id(), "-CONT");
    }
}

/// Sets `env` on `cmd` and removes every other `AWS_*` variable of the caller, so the command
/// reaches only the server the test means (or, with no `env`, no configured one).
pub fn with_only(cmd: &mut Command, env: Vec<(&'static str, String)>) {
    for (key, _) in std::env::vars().filter(|(k, _)| k.starts_with("AWS_")) {
        cmd.env_remove(key);
    }
    cmd.envs(env);
}

fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill").args([sig, &pid.to_string()]).status().expect("kill runs");
    assert!(status.success(), "kill {sig} {pid} failed");
}

impl Drop for Moto {
    fn drop(&mut self) {
        // A frozen process ignores SIGKILL until continued on some systems; continue it first.
        let _ = Command::new("kill").args(["-CONT", &self.child.id().to_string()]).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
