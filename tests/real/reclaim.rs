//! A runner on a real node killed with SIGKILL: its children die with it,
//! what the kernel keeps (the cluster's temp dir, the node's network
//! namespace, link and cgroup directories) is found through the run's record
//! and removed by `dra-e2e clean`; and a live run's things are left alone by
//! `clean` and by the reclaim another run's start makes, and that run still
//! passes.
//!
//! Every command gets a private record registry (`DRA_E2E_RUN_RECORDS`),
//! so other runs on the machine do not enter the counts.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::common::{self, Watched};
use dra_e2e::cluster::host::leftovers::{Item, Record};

const NODE_UP: Duration = Duration::from_secs(400);

fn with_records(mut c: Command, registry: &Path) -> Command {
    c.env("DRA_E2E_RUN_RECORDS", registry);
    c
}

/// The runner on its own local cluster with one real node.
fn real_run(home: &Path, registry: &Path, fixture: &str) -> Command {
    let mut c = with_records(common::isolated(home), registry);
    common::on_real_nodes(&mut c);
    c.args(["--cluster", "local", "--node-kind", "real", "--nodes", "1"])
        .arg("--features")
        .arg(common::fixtures(fixture));
    c
}

fn clean(home: &Path, registry: &Path) -> Output {
    with_records(common::isolated(home), registry)
        .arg("clean")
        .output()
        .unwrap()
}

/// The one record in `registry` and what it lists.
fn the_record(registry: &Path) -> (PathBuf, Vec<Item>) {
    let records: Vec<PathBuf> = std::fs::read_dir(registry)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "run"))
        .collect();
    assert_eq!(records.len(), 1, "{records:?}");
    let text = std::fs::read_to_string(&records[0]).unwrap();
    let record = Record::parse(&text).unwrap();
    (records[0].clone(), record.items)
}

/// What of `items` is on the host, each with every cgroup hierarchy's dir.
fn present(items: &[Item]) -> Vec<String> {
    let mut found = Vec::new();
    for i in items {
        match i {
            Item::Cgroup(root) => {
                for h in dra_e2e::cluster::host::cgroups::hierarchies() {
                    let d = h.join(root.trim_start_matches('/'));
                    if d.exists() {
                        found.push(format!("cgroup {}", d.display()));
                    }
                }
            }
            other if other.exists() => found.push(other.to_string()),
            _ => {}
        }
    }
    found
}

/// Processes in `netns` (by its inode), or naming `dir`.
fn users(netns: &str, dir: &Path, cgroup: &str) -> Vec<String> {
    use std::os::unix::fs::MetadataExt as _;
    let ino = std::fs::metadata(Path::new("/run/netns").join(netns)).map(|m| m.ino());
    let needle = dir.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let in_ns = ino.as_ref().is_ok_and(|ino| {
            std::fs::read_link(e.path().join("ns/net"))
                .is_ok_and(|l| l.to_string_lossy() == format!("net:[{ino}]"))
        });
        let cmd = std::fs::read(e.path().join("cmdline"))
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .unwrap_or_default();
        // An exiting process (a zombie not reaped yet) has left the network
        // namespace and has no command line, but still holds its cgroup.
        let in_cgroup = std::fs::read_to_string(e.path().join("cgroup")).is_ok_and(|c| {
            c.lines().any(|l| {
                l.strip_prefix("0::")
                    .is_some_and(|p| p == cgroup || p.starts_with(&format!("{cgroup}/")))
            })
        });
        if in_ns || in_cgroup || cmd.contains(&needle) {
            found.push(format!("{:?} {cmd}", e.file_name()));
        }
    }
    found
}

fn kinds(items: &[Item]) -> (String, PathBuf, String) {
    /// The one item of a kind the record must name.
    fn named<T>(items: &[Item], what: &str, pick: impl Fn(&Item) -> Option<T>) -> T {
        items
            .iter()
            .find_map(pick)
            .unwrap_or_else(|| panic!("the record names no {what}: {items:?}"))
    }
    let netns = named(items, "network namespace of the node", |i| match i {
        Item::Netns(n) => Some(n.clone()),
        _ => None,
    });
    let dir = named(items, "directory of the cluster", |i| match i {
        Item::Dir(d) => Some(d.clone()),
        _ => None,
    });
    let cgroup = named(items, "cgroup of the node", |i| match i {
        Item::Cgroup(c) => Some(c.clone()),
        _ => None,
    });
    assert!(
        items.iter().any(|i| i.to_string().starts_with("link")),
        "no link in {items:?}"
    );
    (netns, dir, cgroup)
}

#[test]
fn a_run_killed_with_sigkill_leaves_what_clean_removes() {
    let home = tempfile::tempdir().unwrap();
    let registry = home.path().join("runs");
    let run = Watched::spawn(real_run(home.path(), &registry, "interrupt"));
    // Once its pod runs, the node has containers, shims and pod links.
    let up = run.wait_line("pod \"tester-1\" is running", NODE_UP);
    let _ = dra_e2e::sys::kill(run.child.id(), dra_e2e::sys::Signal::Kill);
    let (code, t) = run.finish();
    assert!(up, "the scenario's pod never ran\n{t}");
    assert_eq!(code, None, "killed by a signal\n{t}");

    let (record, items) = the_record(&registry);
    let (netns, dir, cgroup) = kinds(&items);
    // Its children died with it: nothing runs in the node's namespace, its
    // cgroup or from the cluster's dir (exiting ones are waited for).
    let deadline = Instant::now() + Duration::from_secs(60);
    while !users(&netns, &dir, &cgroup).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(users(&netns, &dir, &cgroup), Vec::<String>::new(), "{t}");
    // What the kernel keeps without a process: all of it, as recorded.
    let left = present(&items);
    for want in ["network namespace", "link", "cgroup", "directory"] {
        assert!(
            left.iter().any(|l| l.starts_with(want)),
            "no {want} left: {left:?}"
        );
    }

    let o = clean(home.path(), &registry);
    let c = common::text(&o);
    assert_eq!(o.status.code(), Some(0), "{c}");
    for i in &items {
        assert!(
            c.contains(&format!("removed: {i} (run ")),
            "{i} not removed\n{c}"
        );
    }
    assert_eq!(present(&items), Vec::<String>::new(), "{c}");
    assert!(!record.exists(), "the record stays\n{c}");
    assert_eq!(users(&netns, &dir, &cgroup), Vec::<String>::new());
    common::assert_nothing_left(home.path(), &c);
}

#[test]
fn a_live_runs_things_survive_clean_and_another_runs_start() {
    let home = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let registry = home.path().join("runs");
    let run = Watched::spawn(real_run(home.path(), &registry, "reclaim"));
    let up = run.wait_line("pod \"tester-1\" is running", NODE_UP);
    if !up {
        run.sigint();
        panic!("the scenario's pod never ran\n{}", run.finish().1);
    }
    let (record, items) = the_record(&registry);
    kinds(&items);
    let before = present(&items);

    // `clean` from elsewhere: it names run 1's things as in use.
    let o = clean(other.path(), &registry);
    let c = common::text(&o);
    let alive: Vec<&str> = c
        .lines()
        .filter(|l| l.starts_with("left, in use: ") && l.ends_with(", alive)"))
        .collect();
    assert_eq!(alive.len(), items.len(), "{c}");
    for i in &items {
        assert!(!c.contains(&format!("removed: {i}")), "{c}");
    }
    assert_eq!(present(&items), before, "{c}");

    // Another run's start reclaims, and leaves run 1 alone.
    let mut up2 = with_records(common::isolated(other.path()), &registry);
    up2.args(["cluster", "up", "--nodes", "0"]);
    let second = Watched::spawn(up2);
    let reclaimed = second.wait_line("reclaimed", Duration::from_secs(300));
    second.sigint();
    let (_, t2) = second.finish();
    assert!(reclaimed, "the second run never reclaimed\n{t2}");
    for i in &items {
        assert!(!t2.contains(&format!("{i} (")), "{i} touched\n{t2}");
    }
    assert_eq!(present(&items), before, "{t2}");
    assert!(record.exists());

    let (code, t) = run.finish();
    assert_eq!(code, Some(0), "{t}");
    assert!(t.contains("1 passed"), "{t}");
    assert!(t.contains("leak check: nothing left behind"), "{t}");
    // Its end removed all of it, and its record.
    assert_eq!(present(&items), Vec::<String>::new(), "{t}");
    assert!(!record.exists(), "{t}");
    common::assert_nothing_left(home.path(), &t);
    common::assert_nothing_left_soon(other.path(), &t2);
}
