//! Dataset locations given on the command line (a path, `file://` or `s3://` URL) and the
//! object-storage flags every command shares.

use std::time::Duration;

use anyhow::{bail, Context as _};
pub use probelake_format::storage::{display_uri as display, local_dir};
use probelake_format::storage::{open, StorageOptions};
use probelake_format::Lake;

/// How to reach S3-compatible storage; each flag overrides the `AWS_*` variable it names.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Object storage (s3:// datasets; flags override the AWS_* variables)")]
pub struct StorageArgs {
    /// Endpoint of an S3-compatible server, e.g. http://127.0.0.1:9000 for MinIO [env: AWS_ENDPOINT].
    #[arg(long, global = true, value_name = "URL")]
    pub s3_endpoint: Option<String>,
    /// Region [env: AWS_REGION].
    #[arg(long, global = true, value_name = "NAME")]
    pub s3_region: Option<String>,
    /// Access key id [env: AWS_ACCESS_KEY_ID].
    #[arg(long, global = true, value_name = "ID")]
    pub s3_access_key_id: Option<String>,
    /// Secret access key; prefer the variable, flags show in `ps` [env: AWS_SECRET_ACCESS_KEY].
    #[arg(long, global = true, value_name = "SECRET")]
    pub s3_secret_access_key: Option<String>,
    /// Session token of temporary credentials [env: AWS_SESSION_TOKEN].
    #[arg(long, global = true, value_name = "TOKEN")]
    pub s3_session_token: Option<String>,
    /// Allow a plain http:// endpoint [env: AWS_ALLOW_HTTP].
    #[arg(long, global = true)]
    pub s3_allow_http: bool,
    /// Retries of a failed request before giving up (transient errors only).
    #[arg(long, global = true, value_name = "N", default_value_t = 4)]
    pub s3_retries: usize,
    /// Seconds one request may take before it is retried.
    #[arg(long, global = true, value_name = "SECS", default_value_t = 120.0)]
    pub s3_timeout: f64,
}

impl StorageArgs {
    /// The library's options: flags first, then the environment.
    pub fn options(&self) -> anyhow::Result<StorageOptions> {
        if !(self.s3_timeout.is_finite() && self.s3_timeout > 0.0) {
            bail!("--s3-timeout must be a positive number of seconds");
        }
        let timeout = Duration::from_secs_f64(self.s3_timeout);
        Ok(StorageOptions {
            endpoint: self.s3_endpoint.clone(),
            region: self.s3_region.clone(),
            access_key_id: self.s3_access_key_id.clone(),
            secret_access_key: self.s3_secret_access_key.clone(),
            session_token: self.s3_session_token.clone(),
            allow_http: self.s3_allow_http.then_some(true),
            max_retries: self.s3_retries,
            request_timeout: timeout,
            retry_timeout: timeout.max(Duration::from_secs(60)),
            connect_timeout: timeout.min(Duration::from_secs(5)),
            ..StorageOptions::default()
        })
    }
}

/// Opens (creating a local folder if needed) the dataset at `uri`.
pub fn open_lake(uri: &str, storage: &StorageOptions) -> anyhow::Result<Lake> {
    open(uri, storage).with_context(|| format!("opening dataset {}", display(uri)))
}

/// Opens the dataset at `uri`, which must exist already (readers must not create folders).
pub fn open_existing(uri: &str, storage: &StorageOptions) -> anyhow::Result<Lake> {
    if let Some(dir) = local_dir(uri) {
        if !dir.exists() {
            bail!("{uri}: no such dataset");
        }
    }
    open_lake(uri, storage)
}
