//! How a cluster process opens the stores a plan names.
//!
//! A plan sent to a cluster names each dataset's store by the URL of its root
//! ([`probelake_format::Lake::store_location`]): `file:///` for local folders, `s3://bucket` for object
//! storage. Every process opens those stores itself, with its own storage options (`--s3-*`
//! flags, else its `AWS_*` environment: endpoint, region, credentials), the way `probelake` opens
//! `s3://` datasets anywhere else; credentials never travel with a plan.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use datafusion::error::{DataFusionError, Result};
use datafusion::execution::object_store::ObjectStoreRegistry;
use object_store::local::LocalFileSystem;
use object_store::ObjectStore;
use probelake_format::storage::{self, StorageOptions};
use url::Url;

/// Opens `file://` and `s3://` stores on first use, with the process's storage options (its
/// `--s3-*` flags, else its `AWS_*` environment), and keeps them.
#[derive(Debug, Default)]
pub struct ClusterStores {
    options: StorageOptions,
    opened: Mutex<HashMap<String, Arc<dyn ObjectStore>>>,
}

impl ClusterStores {
    /// Stores opened with `options`.
    pub fn new(options: StorageOptions) -> Self {
        ClusterStores { options, opened: Mutex::default() }
    }
}

fn key(url: &Url) -> String {
    format!("{}://{}", url.scheme(), url.authority())
}

impl ObjectStoreRegistry for ClusterStores {
    fn register_store(&self, url: &Url, store: Arc<dyn ObjectStore>) -> Option<Arc<dyn ObjectStore>> {
        self.opened.lock().ok()?.insert(key(url), store)
    }

    fn deregister_store(&self, url: &Url) -> Result<Arc<dyn ObjectStore>> {
        let removed = self.opened.lock().ok().and_then(|mut opened| opened.remove(&key(url)));
        removed.ok_or_else(|| DataFusionError::Execution(format!("no store registered for {url}")))
    }

    fn get_store(&self, url: &Url) -> Result<Arc<dyn ObjectStore>> {
        let key = key(url);
        let mut opened = self
            .opened
            .lock()
            .map_err(|_| DataFusionError::Execution("the store registry was poisoned by a panic".into()))?;
        if let Some(store) = opened.get(&key) {
            return Ok(Arc::clone(store));
        }
        let store: Arc<dyn ObjectStore> = match url.scheme() {
            "file" => Arc::new(LocalFileSystem::new()),
            "s3" | "s3a" => {
                let lake = storage::open(&key, &self.options).map_err(|e| DataFusionError::Execution(e.to_string()))?;
                Arc::clone(lake.store())
            }
            other => {
                return Err(DataFusionError::Execution(format!(
                    "{key}: a probelake cluster reads file:// and s3:// datasets, not {other}://"
                )))
            }
        };
        opened.insert(key, Arc::clone(&store));
        Ok(store)
    }
}
