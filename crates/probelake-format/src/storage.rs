//! Where datasets live: a dataset URI turned into a [`Lake`].
//!
//! A URI is a local path, a `file://` URL or `s3://bucket/prefix` (also `s3a://`). Every command
//! and the writer open datasets through [`open`], so they all accept the same locations and are
//! configured the same way.
//!
//! S3-compatible stores (AWS, MinIO, Huawei OBS, Ceph) are configured the standard way, by the
//! `AWS_*` environment variables (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_SESSION_TOKEN`, `AWS_REGION`, `AWS_ENDPOINT` or `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`);
//! the fields of [`StorageOptions`] override them.
//!
//! ```
//! use probelake_format::storage::{open, StorageOptions};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let lake = open(&format!("file://{}", dir.path().display()), &StorageOptions::from_env()).unwrap();
//! assert!(lake.display().starts_with("file://"));
//! ```

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path;
use object_store::{BackoffConfig, ClientConfigKey, RetryConfig};

use crate::error::{FormatError, Result};
use crate::lake::Lake;

/// How to reach object storage. `None` fields fall back to the standard `AWS_*` variables.
#[derive(Clone)]
pub struct StorageOptions {
    /// Endpoint URL of an S3-compatible server (`AWS_ENDPOINT`, `AWS_ENDPOINT_URL`).
    pub endpoint: Option<String>,
    /// Region (`AWS_REGION`); S3-compatible servers mostly ignore it.
    pub region: Option<String>,
    /// Access key id (`AWS_ACCESS_KEY_ID`).
    pub access_key_id: Option<String>,
    /// Secret access key (`AWS_SECRET_ACCESS_KEY`). Never printed.
    pub secret_access_key: Option<String>,
    /// Session token of temporary credentials (`AWS_SESSION_TOKEN`). Never printed.
    pub session_token: Option<String>,
    /// Allows `http://` endpoints (`AWS_ALLOW_HTTP`).
    pub allow_http: Option<bool>,
    /// How often a failed request is retried (transient errors only).
    pub max_retries: usize,
    /// No retry starts later than this after the first attempt.
    pub retry_timeout: Duration,
    /// Limit for one request, transfer included.
    pub request_timeout: Duration,
    /// Limit for opening a connection.
    pub connect_timeout: Duration,
    /// Files at least this large are uploaded in parts.
    pub multipart_threshold: usize,
}

impl Default for StorageOptions {
    fn default() -> Self {
        StorageOptions {
            endpoint: None,
            region: None,
            access_key_id: None,
            secret_access_key: None,
            session_token: None,
            allow_http: None,
            max_retries: 4,
            retry_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(5),
            multipart_threshold: 16 * 1024 * 1024,
        }
    }
}

// Hand-written so that secrets can never reach a log line through `{:?}`.
impl fmt::Debug for StorageOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hidden = |s: &Option<String>| s.as_ref().map(|_| "***");
        f.debug_struct("StorageOptions")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &hidden(&self.access_key_id))
            .field("secret_access_key", &hidden(&self.secret_access_key))
            .field("session_token", &hidden(&self.session_token))
            .field("allow_http", &self.allow_http)
            .field("max_retries", &self.max_retries)
            .field("retry_timeout", &self.retry_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("multipart_threshold", &self.multipart_threshold)
            .finish()
    }
}

impl StorageOptions {
    /// Options taken only from the environment.
    pub fn from_env() -> Self {
        StorageOptions::default()
    }
}

/// Smallest part S3 accepts (all parts but the last).
pub const MIN_PART_SIZE: usize = 5 * 1024 * 1024;

/// The local folder (or file) `uri` names: a plain path or a `file://` URL; `None` for object
/// storage and other schemes.
///
/// ```
/// use probelake_format::storage::local_dir;
/// assert_eq!(local_dir("file:///data/run").unwrap(), std::path::Path::new("/data/run"));
/// assert_eq!(local_dir("runs/a").unwrap(), std::path::Path::new("runs/a"));
/// assert!(local_dir("s3://bucket/run").is_none());
/// ```
pub fn local_dir(uri: &str) -> Option<std::path::PathBuf> {
    match uri.strip_prefix("file://") {
        Some(rest) => Some(std::path::PathBuf::from(rest)),
        None if !uri.contains("://") => Some(std::path::PathBuf::from(uri)),
        None => None,
    }
}

/// `uri` as it may be printed: without a user-info part, which could hold a secret.
///
/// ```
/// use probelake_format::storage::display_uri;
/// assert_eq!(display_uri("s3://key:secret@host/bucket"), "s3://…");
/// assert_eq!(display_uri("s3://bucket/run"), "s3://bucket/run");
/// ```
pub fn display_uri(uri: &str) -> String {
    match uri.split_once("://") {
        Some((scheme, rest)) if rest.split('/').next().is_some_and(|host| host.contains('@')) => {
            format!("{scheme}://…")
        }
        _ => uri.to_string(),
    }
}

/// Opens the dataset at `uri` (a local folder is created if missing; a bucket must exist).
pub fn open(uri: &str, options: &StorageOptions) -> Result<Lake> {
    if let Some(rest) = uri.strip_prefix("file://") {
        return Ok(Lake::local(std::path::Path::new(rest))?.with_display(uri));
    }
    let Some((scheme, rest)) = uri.split_once("://") else {
        return Lake::local(std::path::Path::new(uri));
    };
    match scheme {
        "s3" | "s3a" => open_s3(scheme, rest, options),
        _ => Err(FormatError::Unsupported {
            location: uri.to_string(),
            message: format!("`{scheme}://` datasets are not supported; use a local path, file:// or s3://"),
        }),
    }
}

fn open_s3(scheme: &str, rest: &str, options: &StorageOptions) -> Result<Lake> {
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.contains('@') || bucket.contains(':') {
        // Never echo this URL: it probably carries a secret.
        return Err(FormatError::Unsupported {
            location: format!("{scheme}://…"),
            message: "credentials in the URL are not accepted; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY".into(),
        });
    }
    let display = format!("{scheme}://{bucket}/{}", prefix.trim_matches('/')).trim_end_matches('/').to_string();
    if bucket.is_empty() {
        return Err(FormatError::Unsupported {
            location: display,
            message: "no bucket in the URL; write s3://BUCKET/PREFIX".into(),
        });
    }
    let root = Path::parse(prefix.trim_matches('/')).map_err(|e| FormatError::Unsupported {
        location: display.clone(),
        message: format!("not a valid object prefix: {e}"),
    })?;
    remember_secrets(options);
    let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket).with_retry(RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            base: 2.0,
        },
        max_retries: options.max_retries,
        retry_timeout: options.retry_timeout,
    });
    let settings = [
        (AmazonS3ConfigKey::Endpoint, options.endpoint.clone()),
        (AmazonS3ConfigKey::Region, options.region.clone()),
        (AmazonS3ConfigKey::AccessKeyId, options.access_key_id.clone()),
        (AmazonS3ConfigKey::SecretAccessKey, options.secret_access_key.clone()),
        (AmazonS3ConfigKey::Token, options.session_token.clone()),
        (AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp), options.allow_http.map(|b| b.to_string())),
        (AmazonS3ConfigKey::Client(ClientConfigKey::Timeout), Some(seconds(options.request_timeout))),
        (AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout), Some(seconds(options.connect_timeout))),
    ];
    for (key, value) in settings {
        if let Some(value) = value {
            builder = builder.with_config(key, value);
        }
    }
    let store = builder.build().map_err(|e| FormatError::Unsupported {
        location: display.clone(),
        message: format!("cannot configure S3 access: {}", redact(&e.to_string())),
    })?;
    let location = format!("{scheme}://{bucket}");
    Ok(Lake::new(Arc::new(store), root.clone(), display)
        .with_store_location(location, root)
        .with_multipart_threshold(options.multipart_threshold))
}

fn seconds(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

/// Secrets given explicitly (not through the environment) in this process, for [`redact`].
static SECRETS: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn remember_secrets(options: &StorageOptions) {
    let given = [&options.access_key_id, &options.secret_access_key, &options.session_token];
    if let Ok(mut secrets) = SECRETS.lock() {
        for secret in given.into_iter().flatten() {
            if !secret.is_empty() && !secrets.contains(secret) {
                secrets.push(secret.clone());
            }
        }
    }
}

/// `text` with every credential this process knows of (the `AWS_*` secrets of the environment
/// and those passed in [`StorageOptions`]) replaced by `***`.
///
/// Stores echo parts of a request in their error bodies (S3 names the access key it refused),
/// so everything that prints an error from a store passes it through here.
pub fn redact(text: &str) -> String {
    let mut secrets: Vec<String> = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"]
        .iter()
        .filter_map(|k| std::env::var(k).ok())
        .collect();
    if let Ok(given) = SECRETS.lock() {
        secrets.extend(given.iter().cloned());
    }
    // Longest first, so that a secret containing another is replaced whole.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut out = text.to_string();
    for secret in secrets.iter().filter(|s| s.len() >= 4) {
        out = out.replace(secret.as_str(), "***");
    }
    out
}

/// What a failed storage request most likely means, in terms of what the user should check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreFailure {
    /// The endpoint did not answer (refused, unknown host, no route).
    Unreachable,
    /// A request or connection timed out.
    TimedOut,
    /// The server refused the credentials or the signature.
    AccessDenied,
    /// The bucket does not exist.
    NoSuchBucket,
    /// The endpoint is `http://` but plain HTTP is not allowed.
    HttpNotAllowed,
    /// Anything else.
    Other,
}

impl StoreFailure {
    /// Classifies an error by the text of its whole source chain.
    pub fn of(err: &(dyn std::error::Error + 'static)) -> StoreFailure {
        let mut text = String::new();
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(err);
        while let Some(e) = cause {
            text.push_str(&e.to_string());
            text.push('\n');
            cause = e.source();
        }
        StoreFailure::of_text(&text)
    }

    fn of_text(text: &str) -> StoreFailure {
        let has = |needles: &[&str]| needles.iter().any(|n| text.contains(n));
        if has(&["NoSuchBucket", "specified bucket does not exist"]) {
            StoreFailure::NoSuchBucket
        } else if has(&[
            "InvalidAccessKeyId",
            "SignatureDoesNotMatch",
            "AccessDenied",
            "InvalidToken",
            "ExpiredToken",
            "403 Forbidden",
            "status: 403",
        ]) {
            StoreFailure::AccessDenied
        } else if has(&["URL scheme is not allowed", "https only", "HTTP is not allowed"]) {
            StoreFailure::HttpNotAllowed
        } else if has(&[
            "onnection refused",
            "tcp connect error",
            "dns error",
            "failed to lookup address",
            "o route to host",
            "etwork is unreachable",
        ]) {
            StoreFailure::Unreachable
        } else if has(&["timed out", "deadline has elapsed"]) {
            StoreFailure::TimedOut
        } else if has(&["error sending request", "connection closed before message completed", "onnection reset"]) {
            StoreFailure::Unreachable
        } else {
            StoreFailure::Other
        }
    }

    /// What to check, in one sentence; `None` for [`StoreFailure::Other`].
    pub fn advice(self) -> Option<&'static str> {
        Some(match self {
            StoreFailure::Unreachable => {
                "cannot reach the storage endpoint: check AWS_ENDPOINT (or --s3-endpoint) and that the server is up"
            }
            StoreFailure::TimedOut => {
                "the storage endpoint did not answer in time: check the server and the network, then run again"
            }
            StoreFailure::AccessDenied => {
                "access denied: check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) or the --s3-* flags"
            }
            StoreFailure::NoSuchBucket => "the bucket does not exist: create it, or fix the bucket name in the URL",
            StoreFailure::HttpNotAllowed => "the endpoint is plain http://: set AWS_ALLOW_HTTP=true or --s3-allow-http",
            StoreFailure::Other => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_urls_name_bucket_and_prefix() {
        let options = StorageOptions { region: Some("us-east-1".into()), ..StorageOptions::default() };
        let lake = open("s3://bucket/runs/a/", &options).unwrap();
        assert_eq!(lake.display(), "s3://bucket/runs/a");
        assert_eq!(lake.root().as_ref(), "runs/a");
        let lake = open("s3a://bucket", &options).unwrap();
        assert_eq!(lake.display(), "s3a://bucket");
        assert_eq!(lake.root().as_ref(), "");
    }

    #[test]
    fn bad_uris_are_refused_without_echoing_secrets() {
        let err = open("s3://AKIA:hunter2@bucket/x", &StorageOptions::default()).unwrap_err().to_string();
        assert!(!err.contains("hunter2"), "{err}");
        assert!(open("s3:///x", &StorageOptions::default()).unwrap_err().to_string().contains("no bucket"));
        assert!(open("gs://b/x", &StorageOptions::default()).unwrap_err().to_string().contains("not supported"));
        assert!(open("s3://b/a/../c", &StorageOptions::default()).is_err());
    }

    #[test]
    fn debug_hides_secrets_and_redact_replaces_them() {
        let options = StorageOptions {
            access_key_id: Some("AKIDEXAMPLEKEY".into()),
            secret_access_key: Some("s3cr3t-value".into()),
            ..StorageOptions::default()
        };
        let debug = format!("{options:?}");
        assert!(!debug.contains("s3cr3t-value") && !debug.contains("AKIDEXAMPLEKEY"), "{debug}");
        remember_secrets(&options);
        assert_eq!(redact("key AKIDEXAMPLEKEY sig s3cr3t-value!"), "key *** sig ***!");
    }

    #[test]
    fn failures_are_classified_by_their_text() {
        let cases = [
            ("Error performing list: Client error with status 404 Not Found: <Code>NoSuchBucket</Code>", StoreFailure::NoSuchBucket),
            ("status 403 Forbidden: <Code>InvalidAccessKeyId</Code>", StoreFailure::AccessDenied),
            ("error sending request for url (http://127.0.0.1:1/b): client error (Connect): tcp connect error: Connection refused", StoreFailure::Unreachable),
            ("error sending request: operation timed out", StoreFailure::TimedOut),
            ("something else entirely", StoreFailure::Other),
        ];
        for (text, want) in cases {
            assert_eq!(StoreFailure::of_text(text), want, "{text}");
        }
    }
}
