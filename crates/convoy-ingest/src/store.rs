//! Where objects live: a local directory (fsync on every write) or an
//! S3-compatible bucket, behind `object_store`, with a blocking API for
//! the indexer and the web threads (a one-worker tokio runtime of its own
//! drives the requests).
//!
//! A batch of writes can share one flush: [`Store::put_unsynced`] each,
//! then [`Store::sync`] once before anything depends on them. Locally
//! that is one `syncfs` of the directory's file system instead of an
//! fsync of every file and of its directory; an S3 PUT is durable when it
//! returns, so there it is the ordinary PUT and `sync` does nothing.
//!
//! Both backends use the same keys: an upload `VEHICLE/NAME`, telemetry
//! `.telemetry/vehicle=V/date=D/HASH.parquet`. Locally the store's root
//! is the landing directory, so an upload is already where it belongs;
//! with S3 the indexer copies it to the bucket and removes the landing
//! copy once the catalog says where it went.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjPath;
use object_store::prefix::PrefixStore;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};

/// Parts of a multipart upload to S3.
const PART: usize = 8 << 20;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("object store: {0}")]
    Backend(#[from] object_store::Error),
    #[error("{0}: {1}")]
    File(PathBuf, std::io::Error),
    #[error("invalid --store {0:?}: {1}")]
    Url(String, String),
    #[error("object store runtime: {0}")]
    Runtime(std::io::Error),
}

pub struct Store {
    inner: Arc<dyn ObjectStore>,
    /// The same directory without an fsync per write (local stores only).
    unsynced: Option<Arc<LocalFileSystem>>,
    rt: tokio::runtime::Runtime,
    /// The landing directory when it is also the store.
    local_root: Option<PathBuf>,
    url: String,
}

impl Store {
    /// `s3://BUCKET[/PREFIX]` (credentials, region and endpoint from the
    /// usual AWS_* variables: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
    /// AWS_REGION, AWS_ENDPOINT, AWS_ALLOW_HTTP) or `None` for the landing
    /// directory `dir` itself.
    pub fn open(url: Option<&str>, dir: &Path) -> Result<Store, StoreError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("convoy-store")
            .enable_all()
            .build()
            .map_err(StoreError::Runtime)?;
        match url {
            None => {
                let fs = LocalFileSystem::new_with_prefix(dir)?.with_fsync(true);
                let unsynced = LocalFileSystem::new_with_prefix(dir)?;
                Ok(Store {
                    inner: Arc::new(fs),
                    unsynced: Some(Arc::new(unsynced)),
                    rt,
                    local_root: Some(dir.to_owned()),
                    url: format!("file://{}", dir.display()),
                })
            }
            Some(u) => {
                let rest = u.strip_prefix("s3://").ok_or_else(|| {
                    StoreError::Url(u.into(), "only s3://BUCKET[/PREFIX] is supported".into())
                })?;
                let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
                if bucket.is_empty() {
                    return Err(StoreError::Url(u.into(), "no bucket".into()));
                }
                let s3 = AmazonS3Builder::from_env()
                    .with_bucket_name(bucket)
                    .build()?;
                let inner: Arc<dyn ObjectStore> = match prefix.trim_matches('/') {
                    "" => Arc::new(s3),
                    p => Arc::new(PrefixStore::new(s3, p)),
                };
                Ok(Store {
                    inner,
                    unsynced: None,
                    rt,
                    local_root: None,
                    url: u.to_owned(),
                })
            }
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Whether uploads already are in the store where they landed.
    pub fn is_landing_dir(&self) -> bool {
        self.local_root.is_some()
    }

    pub fn put(&self, key: &str, data: Vec<u8>) -> Result<(), StoreError> {
        let path = ObjPath::from(key);
        self.rt
            .block_on(self.inner.put(&path, PutPayload::from(Bytes::from(data))))?;
        Ok(())
    }

    /// Writes an object that is durable only after the next
    /// [`Store::sync`] (see the module's docs). Readers may see it before.
    pub fn put_unsynced(&self, key: &str, data: Vec<u8>) -> Result<(), StoreError> {
        let Some(fs) = &self.unsynced else {
            return self.put(key, data);
        };
        let path = ObjPath::from(key);
        self.rt
            .block_on(fs.put(&path, PutPayload::from(Bytes::from(data))))?;
        Ok(())
    }

    /// Makes every [`Store::put_unsynced`] so far durable: a local store's
    /// file system is flushed (`syncfs`: the files' data, their names and
    /// the directories made for them), which costs about one fsync however
    /// many files were written.
    pub fn sync(&self) -> Result<(), StoreError> {
        let Some(root) = &self.local_root else {
            return Ok(());
        };
        convoy_net::store::sync_file_system(root).map_err(|e| StoreError::File(root.clone(), e))
    }

    /// Copies a local file into the store (in parts when large).
    pub fn put_file(&self, key: &str, file: &Path) -> Result<(), StoreError> {
        let mut f = std::fs::File::open(file).map_err(|e| StoreError::File(file.into(), e))?;
        let len = f
            .metadata()
            .map_err(|e| StoreError::File(file.into(), e))?
            .len();
        if len as usize <= PART {
            let mut buf = Vec::with_capacity(len as usize);
            f.read_to_end(&mut buf)
                .map_err(|e| StoreError::File(file.into(), e))?;
            return self.put(key, buf);
        }
        let path = ObjPath::from(key);
        self.rt.block_on(async {
            let upload = self.inner.put_multipart(&path).await?;
            let mut w = WriteMultipart::new_with_chunk_size(upload, PART);
            let mut buf = vec![0u8; PART];
            loop {
                let n = f
                    .read(&mut buf)
                    .map_err(|e| StoreError::File(file.into(), e))?;
                if n == 0 {
                    break;
                }
                w.wait_for_capacity(2).await?;
                w.write(&buf[..n]);
            }
            w.finish().await?;
            Ok::<(), StoreError>(())
        })
    }

    /// The size of an object, or `None` if there is none.
    pub fn size(&self, key: &str) -> Result<Option<u64>, StoreError> {
        match self.rt.block_on(self.inner.head(&ObjPath::from(key))) {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Bytes `start..end` of an object.
    pub fn get_range(&self, key: &str, start: u64, end: u64) -> Result<Vec<u8>, StoreError> {
        let b = self
            .rt
            .block_on(self.inner.get_range(&ObjPath::from(key), start..end))?;
        Ok(b.to_vec())
    }

    pub fn get(&self, key: &str) -> Result<Vec<u8>, StoreError> {
        let path = ObjPath::from(key);
        let b = self.rt.block_on(async {
            let r = self.inner.get(&path).await?;
            r.bytes().await
        })?;
        Ok(b.to_vec())
    }

    pub fn delete(&self, key: &str) -> Result<(), StoreError> {
        match self.rt.block_on(self.inner.delete(&ObjPath::from(key))) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Keys under `prefix` (tests and tools).
    pub fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        use futures::TryStreamExt;
        let p = ObjPath::from(prefix);
        let metas: Vec<_> = self
            .rt
            .block_on(self.inner.list(Some(&p)).try_collect::<Vec<_>>())?;
        let mut keys: Vec<String> = metas.into_iter().map(|m| m.location.to_string()).collect();
        keys.sort();
        Ok(keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsynced_writes_read_back_and_one_sync_covers_them() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(None, dir.path()).unwrap();
        let keys = [
            ".telemetry/vehicle=a/date=2026-11-30/1.parquet",
            ".telemetry/vehicle=b/date=2026-11-30/2.parquet",
        ];
        for (i, k) in keys.iter().enumerate() {
            store.put_unsynced(k, vec![i as u8; 3]).unwrap();
        }
        store.sync().unwrap();
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(store.get(k).unwrap(), vec![i as u8; 3]);
        }
        assert_eq!(
            store.list(".telemetry").unwrap().len(),
            2,
            "no staging files left"
        );
    }

    #[test]
    fn a_sync_whose_directory_is_gone_fails() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("store");
        std::fs::create_dir(&root).unwrap();
        let store = Store::open(None, &root).unwrap();
        std::fs::remove_dir(&root).unwrap();
        let err = store.sync().unwrap_err().to_string();
        assert!(err.contains("store"), "{err}");
    }
}
