//! Files on a node that a kubelet plugin writes, such as CDI spec files.
//!
//! The plugin writes through this interface so the same code works for a
//! simulated node (a local directory) and a real node (exec into a proxy pod).
use std::path::PathBuf;

use async_trait::async_trait;

#[derive(Debug, thiserror::Error)]
pub enum NodeFilesError {
    #[error("{op} {name} on node: {source}")]
    Io {
        op: &'static str,
        name: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{op} {name} on node: {message}")]
    Remote {
        op: &'static str,
        name: String,
        message: String,
    },
    #[error("invalid file name {0:?}: must be a plain name without '/' or '..'")]
    InvalidName(String),
}

/// A flat directory of files on one node (the CDI spec directory).
///
/// Names are plain file names; implementations decide where the directory is.
#[async_trait]
pub trait NodeFiles: Send + Sync + std::fmt::Debug {
    /// Writes `name` atomically: readers never see a partial file.
    async fn create(&self, name: &str, content: &[u8]) -> Result<(), NodeFilesError>;
    /// Removes `name`; a missing file is not an error.
    async fn remove(&self, name: &str) -> Result<(), NodeFilesError>;
    async fn exists(&self, name: &str) -> Result<bool, NodeFilesError>;
    /// The name and text of every file a CDI reader reads (`*.json`,
    /// `*.yaml`, `*.yml`), sorted by name.
    async fn specs(&self) -> Result<Vec<(String, String)>, NodeFilesError>;
}

/// Whether a CDI reader reads a file of this name.
pub fn is_spec_name(name: &str) -> bool {
    name.ends_with(".json") || name.ends_with(".yaml") || name.ends_with(".yml")
}

pub fn check_name(name: &str) -> Result<(), NodeFilesError> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(NodeFilesError::InvalidName(name.to_owned()));
    }
    Ok(())
}

/// A local directory, as used by simulated nodes.
#[derive(Debug, Clone)]
pub struct LocalDir {
    dir: PathBuf,
}

impl LocalDir {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    pub fn path(&self) -> &std::path::Path {
        &self.dir
    }
}

#[async_trait]
impl NodeFiles for LocalDir {
    async fn create(&self, name: &str, content: &[u8]) -> Result<(), NodeFilesError> {
        check_name(name)?;
        let io = |source| NodeFilesError::Io {
            op: "create",
            name: name.to_owned(),
            source,
        };
        tokio::fs::create_dir_all(&self.dir).await.map_err(io)?;
        // Write beside the target under a name CDI readers ignore, then rename,
        // so a runtime never reads a half-written spec; a name of its own per
        // write, so two writes of one file at once (a retried prepare) do not
        // rename each other's temp file away.
        let tmp = self
            .dir
            .join(format!("{name}.{:x}.tmp", rand::random::<u64>()));
        tokio::fs::write(&tmp, content).await.map_err(io)?;
        if let Err(e) = tokio::fs::rename(&tmp, self.dir.join(name)).await {
            let _ = tokio::fs::remove_file(&tmp).await;
            return Err(io(e));
        }
        Ok(())
    }

    async fn remove(&self, name: &str) -> Result<(), NodeFilesError> {
        check_name(name)?;
        match tokio::fs::remove_file(self.dir.join(name)).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(NodeFilesError::Io {
                op: "remove",
                name: name.to_owned(),
                source,
            }),
        }
    }

    async fn specs(&self) -> Result<Vec<(String, String)>, NodeFilesError> {
        let io = |name: &str, source| NodeFilesError::Io {
            op: "read",
            name: name.to_owned(),
            source,
        };
        let mut entries = match tokio::fs::read_dir(&self.dir).await {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io(".", e)),
        };
        let mut out = Vec::new();
        while let Some(entry) = entries.next_entry().await.map_err(|e| io(".", e))? {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !is_spec_name(&name) {
                continue;
            }
            match tokio::fs::read_to_string(entry.path()).await {
                Ok(text) => out.push((name, text)),
                // Removed between the listing and the read.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io(&name, e)),
            }
        }
        out.sort();
        Ok(out)
    }

    async fn exists(&self, name: &str) -> Result<bool, NodeFilesError> {
        check_name(name)?;
        tokio::fs::try_exists(self.dir.join(name))
            .await
            .map_err(|source| NodeFilesError::Io {
                op: "stat",
                name: name.to_owned(),
                source,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn two_writes_of_one_file_at_once_both_succeed() {
        let tmp = tempfile::tempdir().unwrap();
        let files = std::sync::Arc::new(LocalDir::new(tmp.path().join("cdi")));
        let content = vec![b'x'; 1 << 20];
        let writes: Vec<_> = (0..4)
            .map(|_| {
                let (files, content) = (files.clone(), content.clone());
                tokio::spawn(async move { files.create("same.json", &content).await })
            })
            .collect();
        for w in writes {
            w.await.unwrap().unwrap();
        }
        assert_eq!(
            std::fs::read(tmp.path().join("cdi/same.json")).unwrap(),
            content
        );
    }

    #[tokio::test]
    async fn local_dir_round_trip_and_rejects_paths() {
        let tmp = tempfile::tempdir().unwrap();
        let files = LocalDir::new(tmp.path().join("cdi"));
        files.create("a.json", b"{}").await.unwrap();
        assert!(files.exists("a.json").await.unwrap());
        assert_eq!(std::fs::read(tmp.path().join("cdi/a.json")).unwrap(), b"{}");
        let names: Vec<String> = std::fs::read_dir(tmp.path().join("cdi"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["a.json"], "only the file, no temp file");
        files.remove("a.json").await.unwrap();
        assert!(!files.exists("a.json").await.unwrap());
        files.remove("a.json").await.unwrap();
        assert!(matches!(
            files.create("../x", b"").await,
            Err(NodeFilesError::InvalidName(_))
        ));
    }
}
