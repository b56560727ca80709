//! A watch over the driver's ResourceSlices that goes on in the background
//! while a scenario acts (a rollout of the driver, say) and records every
//! moment one of the scenario's nodes has no device of the driver, and every
//! moment one of the driver's pools is not one consistent pool.
//!
//! A wait for "devices are there" after an update would miss a driver whose
//! slices vanish for a second and come back: the scheduler, asked in that
//! second, finds no device and a pod stays pending. Only a watch that runs
//! throughout sees every deletion, so this one applies each event to its own
//! copy of the driver's slices and checks the nodes after each.
//!
//! A pool's generation is what lets a driver publish a pool of several
//! slices without readers ever seeing half of one change: the scheduler
//! takes only a pool's slices of its highest generation, and trusts those to
//! agree on resourceSliceCount, to be no more than that many, and to hold
//! each device once. A driver that rewrites its slices in place without a
//! new generation breaks that between its writes. Fewer slices than the
//! count is no fault: that is how every new generation starts, and the
//! scheduler waits for the rest. Nor is an unchanged generation by itself
//! (the helper's controller keeps it when a single slice is updated in
//! place and none created), so only what readers see is checked, after each
//! event.
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

/// How many times a pool was inconsistent a failure describes; it counts
/// the rest.
const SHOWN_INCONSISTENCIES: usize = 3;

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

/// A time one of the driver's pools was not one consistent pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inconsistency {
    pub pool: String,
    /// Its highest generation then.
    pub generation: i64,
    /// What was wrong, e.g. `its slices disagree on resourceSliceCount`.
    pub rules: Vec<String>,
    /// Its slices of that generation, each with its count and devices.
    pub slices: Vec<String>,
    pub from: jiff::Timestamp,
    /// When it was consistent again (or wrong in another way); `None`:
    /// still so.
    pub until: Option<jiff::Timestamp>,
    /// The event that made it so.
    pub cause: String,
}

/// What is wrong with a pool made of `slices` (all of one pool), if
/// anything: its generation, the rules its slices of that generation
/// break, and those slices.
fn pool_problems(slices: &[&ResourceSlice]) -> Option<(i64, Vec<String>, Vec<String>)> {
    let generation = slices.iter().map(|s| s.spec.pool.generation).max()?;
    let mut newest: Vec<&ResourceSlice> = slices
        .iter()
        .copied()
        .filter(|s| s.spec.pool.generation == generation)
        .collect();
    newest.sort_by_key(|s| s.metadata.name.clone());
    let name = |s: &ResourceSlice| s.metadata.name.clone().unwrap_or_default();
    let mut rules = Vec::new();
    let mut by_count: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for s in &newest {
        by_count
            .entry(s.spec.pool.resource_slice_count)
            .or_default()
            .push(name(s));
    }
    if by_count.len() > 1 {
        let counts: Vec<String> = by_count
            .iter()
            .map(|(count, names)| format!("{count} in {}", names.join(", ")))
            .collect();
        rules.push(format!(
            "its slices disagree on resourceSliceCount ({})",
            counts.join("; ")
        ));
    }
    let most = by_count.keys().max().copied().unwrap_or_default();
    if i64::try_from(newest.len()).unwrap_or(i64::MAX) > most {
        rules.push(format!(
            "it has {} slices, more than its resourceSliceCount {most}",
            newest.len()
        ));
    }
    let mut holders: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for s in &newest {
        for d in s.spec.devices.iter().flatten() {
            holders.entry(d.name.as_str()).or_default().push(name(s));
        }
    }
    for (device, names) in holders {
        if names.len() > 1 {
            rules.push(format!("device {device} is in {}", names.join(" and ")));
        }
    }
    if rules.is_empty() {
        return None;
    }
    let described = newest
        .iter()
        .map(|s| {
            let devices: Vec<&str> = s
                .spec
                .devices
                .iter()
                .flatten()
                .map(|d| d.name.as_str())
                .collect();
            format!(
                "{} (resourceSliceCount {}, devices: {})",
                name(s),
                s.spec.pool.resource_slice_count,
                if devices.is_empty() {
                    "none".to_owned()
                } else {
                    devices.join(", ")
                }
            )
        })
        .collect();
    Some((generation, rules, described))
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
    inconsistencies: Vec<Inconsistency>,
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
        if s.gaps.is_empty() {
            return Ok(());
        }
        let watch_breaks = s.watch_breaks("a short gap");
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
        Err(format!(
            "driver {}'s ResourceSlices vanished while they were watched on {}: {}; the watch's \
             last event: {}{watch_breaks}",
            self.driver,
            s.nodes.iter().cloned().collect::<Vec<_>>().join(", "),
            gaps.join("; "),
            s.last_event()
        ))
    }

    /// `Ok` when every pool of the driver was one consistent pool at every
    /// moment since the watch started (see the module's comment);
    /// otherwise every time one was not, with the rules its slices broke,
    /// those slices, and the event that made it so.
    pub fn check_consistent(&self) -> Result<(), String> {
        self.lock().consistency(&self.driver)
    }
}

impl Seen {
    /// [`SliceWatch::check_consistent`] of driver `driver`'s slices seen.
    fn consistency(&self, driver: &str) -> Result<(), String> {
        let s = self;
        if s.inconsistencies.is_empty() {
            return Ok(());
        }
        let watch_breaks = s.watch_breaks("a short inconsistency");
        let mut times: Vec<String> = s
            .inconsistencies
            .iter()
            .take(SHOWN_INCONSISTENCIES)
            .map(|i| {
                let until = match i.until {
                    Some(t) => format!(
                        "until {t} ({:.1} s)",
                        (t - i.from).total(jiff::Unit::Second).unwrap_or_default()
                    ),
                    None => "and still is".to_owned(),
                };
                format!(
                    "pool {} at generation {} from {}, after {}, {until}: {}; its slices of \
                     that generation: {}",
                    i.pool,
                    i.generation,
                    i.from,
                    i.cause,
                    i.rules.join("; "),
                    i.slices.join(", ")
                )
            })
            .collect();
        if let Some(more) = s
            .inconsistencies
            .len()
            .checked_sub(SHOWN_INCONSISTENCIES)
            .filter(|n| *n > 0)
        {
            times.push(format!("and {more} more time(s) after those"));
        }
        Err(format!(
            "driver {driver}'s pools were inconsistent while they were watched (the slices of a \
             pool's highest generation must agree on resourceSliceCount, be no more than it, \
             and hold each device once): {}; the watch's last event: {}{watch_breaks}",
            times.join("; "),
            s.last_event()
        ))
    }

    /// The breaks of the watch for a report, or nothing without any.
    fn watch_breaks(&self, missed: &str) -> String {
        if self.breaks.is_empty() {
            return String::new();
        }
        format!(
            " (the watch broke {} time(s) and listed again, so {missed} may be missing: {})",
            self.breaks.len(),
            self.breaks.join("; ")
        )
    }

    fn last_event(&self) -> String {
        self.last_event
            .as_ref()
            .map_or_else(|| "none".to_owned(), |(t, e)| format!("{t} {e}"))
    }

    /// Opens a record for every pool that is inconsistent now and was not
    /// (or was otherwise) before `cause`, and closes those of pools that
    /// are consistent again (or now inconsistent otherwise).
    fn note_pools(&mut self, now: jiff::Timestamp, cause: &str) {
        let mut pools: BTreeMap<&str, Vec<&ResourceSlice>> = BTreeMap::new();
        for slice in self.slices.values() {
            pools
                .entry(slice.spec.pool.name.as_str())
                .or_default()
                .push(slice);
        }
        let problems: BTreeMap<String, (i64, Vec<String>, Vec<String>)> = pools
            .into_iter()
            .filter_map(|(pool, slices)| pool_problems(&slices).map(|p| (pool.to_owned(), p)))
            .collect();
        for open in self
            .inconsistencies
            .iter_mut()
            .filter(|i| i.until.is_none())
        {
            let same = problems
                .get(&open.pool)
                .is_some_and(|(g, rules, _)| *g == open.generation && *rules == open.rules);
            if !same {
                open.until = Some(now);
            }
        }
        for (pool, (generation, rules, slices)) in problems {
            let open = self
                .inconsistencies
                .iter()
                .any(|i| i.pool == pool && i.until.is_none());
            if !open {
                self.inconsistencies.push(Inconsistency {
                    pool,
                    generation,
                    rules,
                    slices,
                    from: now,
                    until: None,
                    cause: cause.to_owned(),
                });
            }
        }
    }

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
        self.note_pools(now, &cause);
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

    /// A slice of node n0's pool `n0` at `generation` saying the pool has
    /// `count` slices.
    fn pool_slice(name: &str, generation: i64, count: i64, devices: &[&str]) -> ResourceSlice {
        let mut s = slice(name, "n0", devices);
        s.spec.pool.generation = generation;
        s.spec.pool.resource_slice_count = count;
        s
    }

    /// Node n0's pool of four slices a0..a3 at generation 1, one device
    /// each (device-i in ai), as the rolling driver publishes it.
    fn four_slices() -> Seen {
        let slices = (0..4)
            .map(|i| pool_slice(&format!("a{i}"), 1, 4, &[&format!("device-{i}")]))
            .collect();
        listed(slices, &["n0".to_owned()])
    }

    fn update(s: &mut Seen, slice: ResourceSlice) {
        s.apply(Ok(Event::Apply(slice)));
    }

    fn delete(s: &mut Seen, slice: ResourceSlice) {
        s.apply(Ok(Event::Delete(slice)));
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

    /// What the helper's ResourceSlice controller writes when the device
    /// count goes 4 → 3 → 4: the surplus slice deleted first, then every
    /// remaining one updated to a new generation with the new count; then
    /// the three updated to yet another generation and the fourth created.
    /// The pool is incomplete in between, never inconsistent.
    #[test]
    fn the_helpers_generation_bumps_are_consistent() {
        let mut s = four_slices();
        delete(&mut s, pool_slice("a3", 1, 4, &["device-3"]));
        for i in 0..3 {
            update(
                &mut s,
                pool_slice(&format!("a{i}"), 2, 3, &[&format!("device-{i}")]),
            );
        }
        for i in 0..3 {
            update(
                &mut s,
                pool_slice(&format!("a{i}"), 3, 4, &[&format!("device-{i}")]),
            );
        }
        update(&mut s, pool_slice("a4", 3, 4, &["device-3"]));
        assert_eq!(s.inconsistencies, []);
        assert!(s.gaps.is_empty());
    }

    /// The helper keeps the generation when one slice alone changes in
    /// place: still one consistent pool.
    #[test]
    fn one_slice_updated_in_place_keeping_the_generation_is_consistent() {
        let mut s = four_slices();
        update(&mut s, pool_slice("a3", 1, 4, &["device-3b"]));
        assert_eq!(s.inconsistencies, []);
        // An incomplete pool is no fault either.
        delete(&mut s, pool_slice("a2", 1, 4, &["device-2"]));
        assert_eq!(s.inconsistencies, []);
    }

    /// A driver that writes its slices itself and keeps the generation
    /// (4 → 3 devices): the first slice updated disagrees with the others
    /// on the count, then all four outnumber the new count, until the
    /// surplus one goes.
    #[test]
    fn a_pool_rewritten_keeping_its_generation_is_inconsistent() {
        let mut s = four_slices();
        update(&mut s, pool_slice("a0", 1, 3, &["device-0"]));
        update(&mut s, pool_slice("a1", 1, 3, &["device-1"]));
        update(&mut s, pool_slice("a2", 1, 3, &["device-2"]));
        update(&mut s, pool_slice("a3", 1, 3, &["device-3"]));
        delete(&mut s, pool_slice("a3", 1, 3, &["device-3"]));
        let found = &s.inconsistencies;
        assert_eq!(found.len(), 4, "{found:#?}");
        assert_eq!(found[0].pool, "n0");
        assert_eq!(found[0].generation, 1);
        assert_eq!(found[0].cause, "ResourceSlice a0 updated (1 device(s))");
        assert_eq!(
            found[0].rules,
            ["its slices disagree on resourceSliceCount (3 in a0; 4 in a1, a2, a3)"]
        );
        assert_eq!(
            found[0].slices[0],
            "a0 (resourceSliceCount 3, devices: device-0)"
        );
        // Each change of what is wrong is a record of its own.
        assert_eq!(
            found[1].rules,
            ["its slices disagree on resourceSliceCount (3 in a0, a1; 4 in a2, a3)"]
        );
        assert_eq!(
            found[3].rules,
            ["it has 4 slices, more than its resourceSliceCount 3"]
        );
        assert_eq!(found[3].cause, "ResourceSlice a3 updated (1 device(s))");
        assert!(found.iter().all(|i| i.until.is_some()), "{found:#?}");
        let message = s.consistency("d.example.com").unwrap_err();
        assert!(
            message.starts_with(
                "driver d.example.com's pools were inconsistent while they were watched"
            ),
            "{message}"
        );
        assert!(
            message.contains("pool n0 at generation 1 from "),
            "{message}"
        );
        assert!(
            message.contains(", after ResourceSlice a0 updated (1 device(s)), until "),
            "{message}"
        );
        assert!(
            message.contains("and 1 more time(s) after those"),
            "{message}"
        );
        // The last event: the surplus slice deleted, after which the pool
        // was consistent again.
        assert!(message.contains("ResourceSlice a3 deleted"), "{message}");
    }

    /// Devices moved between slices in place: one is in two slices at
    /// once.
    #[test]
    fn a_device_in_two_slices_of_a_generation_is_inconsistent() {
        let mut s = four_slices();
        update(&mut s, pool_slice("a0", 1, 4, &["device-1"]));
        assert_eq!(s.inconsistencies.len(), 1);
        assert_eq!(
            s.inconsistencies[0].rules,
            ["device device-1 is in a0 and a1"]
        );
        assert_eq!(s.inconsistencies[0].until, None);
        // Slices of an older generation do not count.
        let mut s = four_slices();
        update(&mut s, pool_slice("a0", 2, 1, &["device-1"]));
        assert_eq!(s.inconsistencies, []);
    }

    #[test]
    fn a_pool_inconsistent_at_the_start_is_recorded() {
        let s = listed(
            vec![
                pool_slice("a0", 1, 1, &["d"]),
                pool_slice("a1", 1, 1, &["e"]),
            ],
            &["n0".to_owned()],
        );
        assert_eq!(s.inconsistencies.len(), 1);
        assert_eq!(s.inconsistencies[0].cause, "the watch's first listing");
        assert_eq!(
            s.inconsistencies[0].rules,
            ["it has 2 slices, more than its resourceSliceCount 1"]
        );
    }
}
