//! A watch over the driver's ResourceSlices that goes on in the background
//! while a scenario acts (a rollout of the driver, say) and records every
//! moment one of the scenario's nodes has no device of the driver.
//!
//! A wait for "devices are there" after an update would miss a driver whose
//! slices vanish for a second and come back: the scheduler, asked in that
//! second, finds no device and a pod stays pending. Only a watch that runs
//! throughout sees every deletion, so this one applies each event to its own
//! copy of the driver's slices and checks the nodes after each.
//!
//! What it cannot see: a slice deleted and created again while the watch
//! itself is broken and listing anew. Such breaks are counted and named in
//! the report, so a clean result says whether the watch was whole.
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};

use super::devices_per_node;

/// How long the watch may take to list the driver's slices at its start.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A time a node was without any device of the driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gap {
    pub node: String,
    /// When the watch saw the node's last device go (or, at the start,
    /// found none).
    pub from: jiff::Timestamp,
    /// When a device came back; `None`: still none.
    pub until: Option<jiff::Timestamp>,
    /// The event that emptied it, e.g. `ResourceSlice x deleted`.
    pub cause: String,
    /// The node's devices just before.
    pub before: Vec<String>,
}

/// What the watch has seen so far.
#[derive(Debug, Default)]
struct Seen {
    /// The nodes watched: those given, and every node that had devices
    /// of the driver at the first listing.
    nodes: BTreeSet<String>,
    /// The driver's slices by name, as the watch knows them.
    slices: BTreeMap<String, ResourceSlice>,
    /// Slices of a listing in progress (after a break of the watch).
    relisting: Option<BTreeMap<String, ResourceSlice>>,
    /// Whether the first listing is complete.
    listed: bool,
    gaps: Vec<Gap>,
    /// Breaks of the watch (each followed by a new listing).
    breaks: Vec<String>,
    /// The last event applied, for the report.
    last_event: Option<(jiff::Timestamp, String)>,
}

/// The background watch; it stops when dropped (at the end of the
/// scenario, with the World that holds it).
#[derive(Debug)]
pub struct SliceWatch {
    driver: String,
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SliceWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl SliceWatch {
    /// Starts watching driver `driver`'s slices on `nodes` and on every
    /// node where it publishes devices now (a rollout replaces the
    /// driver's pods on all of them); returns once the watch listed them,
    /// so that everything after it is seen.
    pub async fn start(
        client: kube::Client,
        driver: &str,
        nodes: Vec<String>,
    ) -> Result<SliceWatch, String> {
        let api: Api<ResourceSlice> = Api::all(client);
        let config = watcher::Config::default().fields(&format!("spec.driver={driver}"));
        let seen = Arc::new(Mutex::new(Seen {
            nodes: nodes.into_iter().collect(),
            ..Seen::default()
        }));
        let (listed_tx, listed_rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn({
            let seen = seen.clone();
            async move {
                let mut listed_tx = Some(listed_tx);
                let mut events = std::pin::pin!(watcher::watcher(api, config));
                while let Some(event) = events.next().await {
                    let mut s = seen.lock().unwrap_or_else(|e| e.into_inner());
                    s.apply(event);
                    if s.listed
                        && let Some(tx) = listed_tx.take()
                    {
                        let _ = tx.send(());
                    }
                }
            }
        });
        let watch = SliceWatch {
            driver: driver.to_owned(),
            seen,
            task,
        };
        match tokio::time::timeout(START_TIMEOUT, listed_rx).await {
            Ok(Ok(())) => Ok(watch),
            _ => {
                let breaks = watch.lock().breaks.clone();
                Err(format!(
                    "the watch on driver {driver}'s ResourceSlices did not list them within \
                     {START_TIMEOUT:?}; its errors: {breaks:?}"
                ))
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `Ok` when none of the nodes was ever without a device of the driver
    /// since the watch started; otherwise every such time, with what
    /// emptied the node and what it had before.
    pub fn check(&self) -> Result<(), String> {
        let s = self.lock();
        let watch_breaks = if s.breaks.is_empty() {
            String::new()
        } else {
            format!(
                " (the watch broke {} time(s) and listed again, so a short gap may be \
                 missing: {})",
                s.breaks.len(),
                s.breaks.join("; ")
            )
        };
        if s.gaps.is_empty() {
            return Ok(());
        }
        let gaps: Vec<String> = s
            .gaps
            .iter()
            .map(|g| {
                let before = if g.before.is_empty() {
                    "none".to_owned()
                } else {
                    g.before.join(", ")
                };
                let until = match g.until {
                    Some(t) => format!(
                        "until {t} ({:.1} s)",
                        (t - g.from).total(jiff::Unit::Second).unwrap_or_default()
                    ),
                    None => "and still has none".to_owned(),
                };
                format!(
                    "node {} had no device from {}, after {} (before it had {before}), {until}",
                    g.node, g.from, g.cause
                )
            })
            .collect();
        let last = s
            .last_event
            .as_ref()
            .map_or_else(|| "none".to_owned(), |(t, e)| format!("{t} {e}"));
        Err(format!(
            "driver {}'s ResourceSlices vanished while they were watched on {}: {}; the watch's \
             last event: {last}{watch_breaks}",
            self.driver,
            s.nodes.iter().cloned().collect::<Vec<_>>().join(", "),
            gaps.join("; ")
        ))
    }
}

impl Seen {
    fn apply(&mut self, event: Result<Event<ResourceSlice>, watcher::Error>) {
        let before = devices_per_node(&self.slices.values().cloned().collect::<Vec<_>>());
        let name = |s: &ResourceSlice| s.metadata.name.clone().unwrap_or_default();
        let cause = match event {
            Err(e) => {
                // The watcher lists again by itself, with backoff.
                self.breaks.push(format!("{} {e}", jiff::Timestamp::now()));
                return;
            }
            Ok(Event::Init) => {
                self.relisting = Some(BTreeMap::new());
                return;
            }
            Ok(Event::InitApply(slice)) => {
                self.relisting
                    .get_or_insert_with(BTreeMap::new)
                    .insert(name(&slice), slice);
                return;
            }
            Ok(Event::InitDone) => {
                self.slices = self.relisting.take().unwrap_or_default();
                let first = !self.listed;
                self.listed = true;
                if first {
                    let publishing =
                        devices_per_node(&self.slices.values().cloned().collect::<Vec<_>>());
                    self.nodes.extend(
                        publishing
                            .into_iter()
                            .filter(|(_, d)| !d.is_empty())
                            .map(|(n, _)| n),
                    );
                    "the watch's first listing".to_owned()
                } else {
                    "a new listing of the watch".to_owned()
                }
            }
            Ok(Event::Apply(slice)) => {
                let n = name(&slice);
                let what = if self.slices.contains_key(&n) {
                    "updated"
                } else {
                    "created"
                };
                let devices = slice.spec.devices.as_ref().map_or(0, Vec::len);
                self.slices.insert(n.clone(), slice);
                format!("ResourceSlice {n} {what} ({devices} device(s))")
            }
            Ok(Event::Delete(slice)) => {
                let n = name(&slice);
                self.slices.remove(&n);
                format!("ResourceSlice {n} deleted")
            }
        };
        let now = jiff::Timestamp::now();
        let after = devices_per_node(&self.slices.values().cloned().collect::<Vec<_>>());
        for node in &self.nodes {
            let has = after.get(node).is_some_and(|d| !d.is_empty());
            let open = self
                .gaps
                .iter_mut()
                .rev()
                .find(|g| &g.node == node && g.until.is_none());
            match (has, open) {
                (true, Some(gap)) => gap.until = Some(now),
                (false, None) => self.gaps.push(Gap {
                    node: node.clone(),
                    from: now,
                    until: None,
                    cause: cause.clone(),
                    before: before.get(node).cloned().unwrap_or_default(),
                }),
                _ => {}
            }
        }
        self.last_event = Some((now, cause));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(name: &str, node: &str, devices: &[&str]) -> ResourceSlice {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": name },
            "spec": {
                "driver": "d.example.com",
                "nodeName": node,
                "pool": { "name": node, "generation": 1, "resourceSliceCount": 1 },
                "devices": devices.iter().map(|d| serde_json::json!({ "name": d })).collect::<Vec<_>>(),
            }
        }))
        .unwrap()
    }

    fn listed(slices: Vec<ResourceSlice>, nodes: &[String]) -> Seen {
        let mut s = Seen {
            nodes: nodes.iter().cloned().collect(),
            ..Seen::default()
        };
        s.apply(Ok(Event::Init));
        for sl in slices {
            s.apply(Ok(Event::InitApply(sl)));
        }
        s.apply(Ok(Event::InitDone));
        s
    }

    #[test]
    fn a_slice_deleted_and_created_again_is_a_gap_with_its_end() {
        let nodes = vec!["n0".to_owned(), "n1".to_owned()];
        let mut s = listed(
            vec![slice("a", "n0", &["dev-0"]), slice("b", "n1", &["dev-0"])],
            &nodes,
        );
        assert!(s.gaps.is_empty());
        s.apply(Ok(Event::Delete(slice("a", "n0", &["dev-0"]))));
        s.apply(Ok(Event::Apply(slice("a", "n0", &["dev-0"]))));
        assert_eq!(s.gaps.len(), 1);
        let gap = &s.gaps[0];
        assert_eq!(gap.node, "n0");
        assert_eq!(gap.cause, "ResourceSlice a deleted");
        assert_eq!(gap.before, ["dev-0"]);
        assert!(gap.until.is_some());
    }

    #[test]
    fn a_new_slice_before_the_old_goes_is_no_gap() {
        let nodes = vec!["n0".to_owned()];
        let mut s = listed(vec![slice("a", "n0", &["dev-0"])], &nodes);
        s.apply(Ok(Event::Apply(slice("b", "n0", &["dev-0"]))));
        s.apply(Ok(Event::Delete(slice("a", "n0", &["dev-0"]))));
        s.apply(Ok(Event::Apply(slice("b", "n0", &[]))));
        assert_eq!(s.gaps.len(), 1, "emptied by an update: {:?}", s.gaps);
        assert_eq!(s.gaps[0].cause, "ResourceSlice b updated (0 device(s))");
        assert_eq!(s.gaps[0].until, None);
    }

    #[test]
    fn every_node_publishing_at_the_start_is_watched() {
        let mut s = listed(vec![slice("a", "n5", &["dev-0"])], &[]);
        s.apply(Ok(Event::Delete(slice("a", "n5", &["dev-0"]))));
        assert_eq!(s.gaps.len(), 1);
        assert_eq!(s.gaps[0].node, "n5");
    }

    #[test]
    fn a_node_without_devices_at_the_start_is_a_gap() {
        let nodes = vec!["n0".to_owned(), "n1".to_owned()];
        let s = listed(vec![slice("a", "n0", &["dev-0"])], &nodes);
        assert_eq!(s.gaps.len(), 1);
        assert_eq!(s.gaps[0].node, "n1");
        assert_eq!(s.gaps[0].cause, "the watch's first listing");
    }
}
