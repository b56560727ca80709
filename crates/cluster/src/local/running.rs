//! The cluster's processes and directory, and their end: one owner for
//! both, so that a half-started cluster, a stopped one and one dropped while
//! a panic unwinds are all cleaned up by the same code, and the run's
//! record closes only once what it lists is gone.
use std::fs;
use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::{Binaries, LocalClusterError, LocalClusterOptions};
use crate::host::leftovers::{Item, Registry, RunRecord};
use crate::host::process::{self, ManagedProcess};

/// The processes and directory of a cluster; stopping happens here so that a
/// half-started cluster is cleaned up by the same code as a running one.
#[derive(Default)]
pub(super) struct Running {
    /// In start order: etcd, kube-apiserver, then the controllers.
    /// Shared with a restart under way ([`Restart`](super::Restart)), which puts the
    /// process it started in its place.
    pub(super) processes: Vec<Arc<ManagedProcess>>,
    pub(super) dir: Option<PathBuf>,
    /// The run's record of what it made on the host; closed at the end once
    /// all of it is gone.
    pub(super) record: Option<Arc<RunRecord>>,
    pub(super) keep_files: bool,
    pub(super) grace: Duration,
}

impl Running {
    /// Starts the run's record, then makes the cluster's directory
    /// (`dra-e2e-XXXXXX` in the temp dir, mode 0700), recorded first.
    pub(super) fn create(options: &LocalClusterOptions) -> Result<Self, LocalClusterError> {
        use rand::Rng as _;
        let base = options.base_dir.clone().unwrap_or_else(std::env::temp_dir);
        let record = Arc::new(Registry::for_this_user().start_record()?);
        let mut running = Self {
            processes: Vec::new(),
            dir: None,
            record: Some(record.clone()),
            keep_files: options.keep_files,
            grace: options.stop_grace_period,
        };
        let dir = loop {
            // As tempfile names them: six letters or digits, so the path
            // stays short (kubelet plugin sockets live below it).
            let name: String = rand::rng()
                .sample_iter(rand::distr::Alphanumeric)
                .take(6)
                .map(char::from)
                .collect();
            let path = base.join(format!("dra-e2e-{name}"));
            // Taken names are skipped before recording, so the record does
            // not name another run's directory (short of two runs drawing the
            // same name within this moment).
            if path.symlink_metadata().is_ok() {
                continue;
            }
            record.add(match options.keep_files {
                true => Item::KeptDir(path.clone()),
                false => Item::Dir(path.clone()),
            })?;
            match fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => break path,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(source) => return Err(LocalClusterError::TempDir { base, source }),
            }
        };
        running.dir = Some(dir.clone());
        // The umask may have taken bits away; 0700 is what is meant.
        set_mode(&dir, 0o700)?;
        Ok(running)
    }

    pub(super) fn path(&self) -> &Path {
        self.dir.as_deref().unwrap_or_else(|| Path::new(""))
    }

    pub(super) fn spawn(
        &mut self,
        binaries: &Binaries,
        component: &str,
        args: Vec<std::ffi::OsString>,
        log_dir: &Path,
    ) -> Result<usize, LocalClusterError> {
        let binary = binaries.path(component);
        let log = log_dir.join(format!("{component}.log"));
        let process = ManagedProcess::spawn(component, &binary, args, &log).map_err(|source| {
            LocalClusterError::Spawn {
                component: component.to_owned(),
                binary: binary.clone(),
                source,
            }
        })?;
        self.processes.push(Arc::new(process));
        Ok(self.processes.len() - 1)
    }

    /// Idempotent: stops what runs, removes (or keeps) the directory.
    pub(super) fn shutdown(&mut self) -> Result<(), LocalClusterError> {
        let mut processes = std::mem::take(&mut self.processes);
        // Controllers first so they do not spin on a vanished API server, then
        // the API server, then its storage.
        let core = processes.len().min(2);
        let controllers: Vec<&ManagedProcess> = processes[core..].iter().map(|p| &**p).collect();
        process::stop_all(&controllers, self.grace);
        for p in processes[..core].iter().rev() {
            process::stop_all(&[p], self.grace);
        }
        // Joins the reaper threads.
        processes.clear();

        let removed = match self.dir.take() {
            None => Ok(()),
            Some(path) if self.keep_files => {
                // The caller tells the user (it knows whether one is watching).
                tracing::info!(dir = %path.display(), "kept the local cluster's files");
                Ok(())
            }
            Some(path) => fs::remove_dir_all(&path)
                .map_err(|source| LocalClusterError::Cleanup { path, source }),
        };
        // Whatever is still there keeps the record, for a reclaim once this
        // process is gone.
        if let Some(record) = self.record.take() {
            for item in record.close() {
                tracing::warn!(record = %record.path().display(), "left for a later reclaim: {item}");
            }
        }
        removed
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.processes.is_empty() && self.dir.is_none() && self.record.is_none() {
            return;
        }
        if let Err(e) = self.shutdown() {
            tracing::error!(error = %e, "cleaning up the local cluster");
        }
    }
}

pub(super) fn make_dir(path: &Path, mode: u32) -> Result<PathBuf, LocalClusterError> {
    fs::create_dir(path).map_err(|source| LocalClusterError::Io {
        path: path.to_owned(),
        source,
    })?;
    set_mode(path, mode)?;
    Ok(path.to_owned())
}

fn set_mode(path: &Path, mode: u32) -> Result<(), LocalClusterError> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(|source| {
        LocalClusterError::Io {
            path: path.to_owned(),
            source,
        }
    })
}
