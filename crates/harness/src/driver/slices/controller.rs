//! The slice controller: one cluster-wide pool published as a list of
//! slices, reconciled on every change and counting its writes, with faults
//! it can be given on purpose, so that upstream's "creates slices" checks
//! can be shown to catch a controller that writes too much or too little.
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{build, devices_of};

/// API limits of resource.k8s.io/v1 that make the largest slices.
pub mod limits {
    pub const DEVICES_PER_SLICE: usize = 128;
    pub const ATTRIBUTES_PER_DEVICE: usize = 32;
    pub const DOMAIN_LENGTH: usize = 63;
    pub const ID_LENGTH: usize = 32;
    pub const VALUE_LENGTH: usize = 64;
    pub const NAME_LENGTH: usize = 63;
}

/// `slices` slices of the largest devices the API accepts: the most devices
/// per slice, the most attributes per device, names and values of maximum
/// length (upstream's integration helper that measures slice sizes).
pub fn max_size_slices(slices: usize) -> Vec<Vec<Value>> {
    use limits::*;
    let suffix = ".example.com";
    let domain = format!("{}{suffix}", "x".repeat(DOMAIN_LENGTH - suffix.len()));
    let value = "v".repeat(VALUE_LENGTH);
    let attributes: serde_json::Map<String, Value> = (0..ATTRIBUTES_PER_DEVICE)
        .map(|j| {
            (
                format!("{domain}/{}{j:04}", "x".repeat(ID_LENGTH - 4)),
                json!({ "string": value }),
            )
        })
        .collect();
    let prefix = "dev-";
    let filler = "x".repeat(NAME_LENGTH - prefix.len() - 6);
    (0..slices)
        .map(|i| {
            (0..DEVICES_PER_SLICE)
                .map(|e| {
                    let n = i * DEVICES_PER_SLICE + e;
                    json!({ "name": format!("{prefix}{filler}{n:06}"), "attributes": attributes })
                })
                .collect()
        })
        .collect()
}

/// The writes a [`SliceController`] made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ControllerStats {
    pub creates: u64,
    pub updates: u64,
    pub deletes: u64,
}

impl std::fmt::Display for ControllerStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} creates, {} updates, {} deletes",
            self.creates, self.updates, self.deletes
        )
    }
}

struct Desired {
    /// The devices of each slice of the pool.
    slices: Vec<Vec<Value>>,
    generation: i64,
}

/// Publishes one cluster-wide pool of a driver as a list of slices, like the
/// kubelet plugin helper's ResourceSlice controller: watches the driver's
/// slices and, on every change, creates what is missing and deletes what is
/// no longer wanted, counting its writes. Nothing is written while the
/// slices are as wanted.
/// A fault the slice controller can be given on purpose, so a test can show
/// that the checks of upstream's "creates slices" catch it. Set for a whole
/// run with `--slice-controller-fault`; never in a real run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ControllerFault {
    #[default]
    None,
    /// Rewrites one of its slices every second although nothing changed.
    Churn,
    /// Ignores being told to publish other slices.
    NoShrink,
}

impl ControllerFault {
    /// The faults by the names the option takes.
    pub const ALL: [(&str, ControllerFault); 3] = [
        ("none", ControllerFault::None),
        ("churn", ControllerFault::Churn),
        ("no-shrink", ControllerFault::NoShrink),
    ];

    /// The fault called `name`; an unknown one is an error that lists them.
    pub fn named(name: &str) -> Result<Self, String> {
        Self::ALL
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, f)| *f)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|(n, _)| *n).collect();
                format!(
                    "{name:?} is no fault of the slice controller; one of: {}",
                    names.join(", ")
                )
            })
    }
}

pub struct SliceController {
    fault: ControllerFault,
    desired: std::sync::Arc<std::sync::Mutex<Desired>>,
    stats: std::sync::Arc<std::sync::Mutex<ControllerStats>>,
    kick: tokio::sync::watch::Sender<u64>,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

impl SliceController {
    pub fn start(
        client: kube::Client,
        driver: &str,
        pool: &str,
        slices: Vec<Vec<Value>>,
        fault: ControllerFault,
    ) -> Self {
        let desired = std::sync::Arc::new(std::sync::Mutex::new(Desired {
            slices,
            generation: 1,
        }));
        let stats = std::sync::Arc::new(std::sync::Mutex::new(ControllerStats::default()));
        let (kick, kicked) = tokio::sync::watch::channel(0);
        let cancel = CancellationToken::new();
        let task = tokio::spawn(control(
            client,
            Controlled {
                driver: driver.to_owned(),
                pool: pool.to_owned(),
                desired: desired.clone(),
                stats: stats.clone(),
                fault,
            },
            kicked,
            cancel.clone(),
        ));
        Self {
            fault,
            desired,
            stats,
            kick,
            cancel,
            task,
        }
    }

    pub fn stats(&self) -> ControllerStats {
        *self.stats.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wants the pool as these slices from now on (a new generation).
    pub fn update(&self, slices: Vec<Vec<Value>>) {
        if self.fault == ControllerFault::NoShrink {
            return;
        }
        {
            let mut d = self.desired.lock().unwrap_or_else(|p| p.into_inner());
            d.slices = slices;
            d.generation += 1;
        }
        self.kick.send_modify(|k| *k += 1);
    }

    pub async fn stop(mut self) {
        self.cancel.cancel();
        let _ = (&mut self.task).await;
    }
}

impl Drop for SliceController {
    /// A step cut short drops its controller: the loop must end with it.
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// What a controller's loop controls: a driver's pool, as it wants it, and
/// how it is told to misbehave, if at all.
struct Controlled {
    driver: String,
    pool: String,
    desired: std::sync::Arc<std::sync::Mutex<Desired>>,
    stats: std::sync::Arc<std::sync::Mutex<ControllerStats>>,
    fault: ControllerFault,
}

async fn control(
    client: kube::Client,
    controlled: Controlled,
    mut kicked: tokio::sync::watch::Receiver<u64>,
    cancel: CancellationToken,
) {
    let Controlled {
        driver,
        pool,
        desired,
        stats,
        fault,
    } = controlled;
    let api: Api<ResourceSlice> = Api::all(client);
    let selector = format!("spec.driver={driver}");
    let mut changes = std::pin::pin!(
        watcher::watcher(api.clone(), watcher::Config::default().fields(&selector))
            .default_backoff()
    );
    let mut retry = false;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            // The controller was dropped without being stopped.
            changed = kicked.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(Duration::from_secs(1)), if retry => {}
            _ = tokio::time::sleep(Duration::from_secs(1)), if fault == ControllerFault::Churn => {
                churn(&api, &selector, &pool, &stats).await;
                continue;
            }
            e = changes.next() => match e {
                None => return,
                Some(Ok(watcher::Event::InitDone | watcher::Event::Apply(_) | watcher::Event::Delete(_))) => {}
                Some(_) => continue,
            },
        }
        // One reconcile for a burst of events (its own writes among them).
        while let Some(Some(_)) = futures::FutureExt::now_or_never(changes.next()) {}
        let (want, generation) = {
            let d = desired.lock().unwrap_or_else(|p| p.into_inner());
            (d.slices.clone(), d.generation)
        };
        retry = reconcile(&api, &selector, &driver, &pool, &want, generation, &stats)
            .await
            .inspect_err(
                |e| tracing::warn!(%pool, error = %e, "reconciling the pool failed, retrying"),
            )
            .is_err();
    }
}

/// The churn fault: deletes one of the pool's slices (which the next
/// reconcile recreates), as a controller that rewrites what did not change.
async fn churn(
    api: &Api<ResourceSlice>,
    selector: &str,
    pool: &str,
    stats: &std::sync::Mutex<ControllerStats>,
) {
    let Ok(list) = api.list(&ListParams::default().fields(selector)).await else {
        return;
    };
    if let Some(name) = list
        .items
        .iter()
        .find(|s| s.spec.pool.name == pool)
        .and_then(|s| s.metadata.name.clone())
        && api.delete(&name, &Default::default()).await.is_ok()
    {
        stats.lock().unwrap_or_else(|p| p.into_inner()).deletes += 1;
    }
}

async fn reconcile(
    api: &Api<ResourceSlice>,
    selector: &str,
    driver: &str,
    pool: &str,
    want: &[Vec<Value>],
    generation: i64,
    stats: &std::sync::Mutex<ControllerStats>,
) -> Result<(), kube::Error> {
    let count =
        |f: fn(&mut ControllerStats)| f(&mut stats.lock().unwrap_or_else(|p| p.into_inner()));
    let existing: Vec<ResourceSlice> = api
        .list(&ListParams::default().fields(selector))
        .await?
        .items
        .into_iter()
        .filter(|s| s.spec.pool.name == pool)
        .collect();
    let mut kept: Vec<bool> = vec![false; want.len()];
    let mut unwanted = Vec::new();
    for slice in existing {
        // The API server drops an empty device list.
        let devices = match devices_of(&slice) {
            Value::Null => json!([]),
            d => d,
        };
        let matches = slice.spec.pool.generation == generation
            && slice.spec.pool.resource_slice_count == want.len() as i64
            && want
                .iter()
                .enumerate()
                .find(|(i, w)| !kept[*i] && devices == json!(w))
                .map(|(i, _)| kept[i] = true)
                .is_some();
        if !matches {
            unwanted.push(slice);
        }
    }
    let missing: Vec<&Vec<Value>> = want
        .iter()
        .zip(&kept)
        .filter(|(_, k)| !**k)
        .map(|(w, _)| w)
        .collect();
    // Like the resourceslice controller of k8s.io/dynamic-resource-allocation:
    // a slice no longer wanted is rewritten with what is missing (an
    // update) while there is something missing, and deleted otherwise;
    // the surplus goes first, so the driver never has more slices than it
    // publishes.
    let surplus = unwanted.split_off(unwanted.len().min(missing.len()));
    for slice in surplus {
        let name = slice.metadata.name.clone().unwrap_or_default();
        match api.delete(&name, &Default::default()).await {
            Ok(_) => count(|s| s.deletes += 1),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let mut reused = unwanted.into_iter();
    for devices in missing {
        let slice = build(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": { "generateName": format!("{driver}-{pool}-") },
            "spec": {
                "driver": driver,
                "allNodes": true,
                "pool": { "name": pool, "generation": generation, "resourceSliceCount": want.len() },
                "devices": devices,
            },
        }))
        .map_err(kube::Error::SerdeError)?;
        match reused.next() {
            Some(mut old) => {
                old.spec = slice.spec;
                let name = old.metadata.name.clone().unwrap_or_default();
                api.replace(&name, &PostParams::default(), &old).await?;
                count(|s| s.updates += 1);
            }
            None => {
                api.create(&PostParams::default(), &slice).await?;
                count(|s| s.creates += 1);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maximum_size_slices_reach_every_limit() {
        let slices = max_size_slices(2);
        assert_eq!(slices.len(), 2);
        assert!(slices.iter().all(|s| s.len() == limits::DEVICES_PER_SLICE));
        let d = &slices[1][127];
        let name = d["name"].as_str().unwrap();
        assert_eq!(name.len(), limits::NAME_LENGTH);
        assert!(name.ends_with("000255"), "{name}");
        let attrs = d["attributes"].as_object().unwrap();
        assert_eq!(attrs.len(), limits::ATTRIBUTES_PER_DEVICE);
        for (k, v) in attrs {
            let (domain, id) = k.split_once('/').unwrap();
            assert_eq!(domain.len(), limits::DOMAIN_LENGTH);
            assert_eq!(id.len(), limits::ID_LENGTH);
            assert_eq!(v["string"].as_str().unwrap().len(), limits::VALUE_LENGTH);
        }
    }
}
