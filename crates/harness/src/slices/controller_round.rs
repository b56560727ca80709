//! Upstream's ResourceSlice controller check, start to end (the controller
//! lives only as long as it): the slices are published, their size is near
//! the API's limit, the controller made exactly those creates and then
//! nothing for the rest period; asked for one empty slice, it rewrites one
//! of them as that one and deletes the others, and again rests. Whatever
//! happens, nothing of its driver stays behind.
use std::ops::Range;
use std::time::Duration;

use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, DeleteParams, ListParams};

use dra_e2e_kube::wait::{self, Check, WaitError};

use super::SliceError;
use crate::driver::slices::{ControllerStats, SliceController};

/// Protobuf size bounds of a maximum-size slice, as upstream checks them.
pub const SLICE_BYTES: Range<usize> = 600 * 1024..1024 * 1024;

/// Runs the round with controller `c` publishing `slices` maximum-size
/// slices of `driver`, resting `rest` after each change, their sizes within
/// `bounds`; then stops `c` and removes the driver's slices.
pub async fn run(
    client: &kube::Client,
    c: SliceController,
    driver: &str,
    slices: usize,
    rest: Duration,
    bounds: Range<usize>,
) -> Result<(), SliceError> {
    let checked = checks(client, &c, driver, slices, rest, bounds).await;
    c.stop().await;
    let cleaned = remove_slices(client, driver).await;
    checked?;
    cleaned
}

/// Deletes the slices of `driver` and waits until none is left.
async fn remove_slices(client: &kube::Client, driver: &str) -> Result<(), SliceError> {
    let api: Api<ResourceSlice> = Api::all(client.clone());
    let lp = ListParams::default().fields(&format!("spec.driver={driver}"));
    api.delete_collection(&DeleteParams::default(), &lp)
        .await
        .map_err(super::kube_err(format!("deleting the slices of {driver}")))?;
    wait::poll(
        &format!("the slices of {driver} to be gone"),
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            match api.list(&lp).await {
                Ok(l) if l.items.is_empty() => Check::Done(()),
                Ok(l) => Check::Pending(format!("{} left", l.items.len())),
                Err(e) => Check::Pending(e.to_string()),
            }
        },
    )
    .await?;
    Ok(())
}

/// Which slice sizes (name, bytes) are out of bounds.
fn size_problems(sizes: &[(String, usize)], bounds: &Range<usize>) -> Option<String> {
    let bad: Vec<String> = sizes
        .iter()
        .filter(|(_, b)| !bounds.contains(b))
        .map(|(n, b)| format!("{n}: {b} bytes"))
        .collect();
    if sizes.is_empty() {
        Some("no slices to measure".to_owned())
    } else if bad.is_empty() {
        None
    } else {
        Some(format!(
            "slices not between {} and {} bytes in protobuf: {}",
            bounds.start,
            bounds.end,
            bad.join(", ")
        ))
    }
}

/// A slice as the API server stores it (protobuf), in bytes.
async fn protobuf_size(client: &kube::Client, name: &str) -> Result<usize, SliceError> {
    use futures::AsyncReadExt as _;
    let failed = |e: &dyn std::fmt::Display| {
        SliceError::Problem(format!("reading ResourceSlice {name} as protobuf: {e}"))
    };
    let req = http::Request::get(format!("/apis/resource.k8s.io/v1/resourceslices/{name}"))
        .header(http::header::ACCEPT, "application/vnd.kubernetes.protobuf")
        .body(Vec::new())
        .map_err(|e| failed(&e))?;
    let mut body = Vec::new();
    client
        .request_stream(req)
        .await
        .map_err(|e| failed(&e))?
        .read_to_end(&mut body)
        .await
        .map_err(|e| failed(&e))?;
    Ok(body.len())
}

async fn driver_slices_of(api: &Api<ResourceSlice>, driver: &str) -> Check<Vec<ResourceSlice>> {
    match api
        .list(&ListParams::default().fields(&format!("spec.driver={driver}")))
        .await
    {
        Ok(l) => Check::Done(l.items),
        Err(e) => Check::Pending(format!("listing slices failed: {e}")),
    }
}

/// The named condition of the first wait: exactly `slices` slices of
/// `driver`; more can never become fewer, as the controller deletes what it
/// does not want before it creates, so it never has more than it publishes.
fn published(
    listed: Check<Vec<ResourceSlice>>,
    driver: &str,
    slices: usize,
) -> Check<Vec<ResourceSlice>> {
    match listed {
        Check::Done(l) if l.len() == slices => Check::Done(l),
        Check::Done(l) if l.len() > slices => Check::Fail(format!(
            "{} slices of {driver}, more than the {slices} the controller publishes: {}",
            l.len(),
            l.iter()
                .map(|s| format!(
                    "{} (pool {})",
                    s.metadata.name.as_deref().unwrap_or("?"),
                    s.spec.pool.name
                ))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        Check::Done(l) => Check::Pending(format!("{} slices", l.len())),
        other => other,
    }
}

/// The named condition of the shrink: one slice, without devices.
fn one_empty(listed: Check<Vec<ResourceSlice>>) -> Check<()> {
    match listed {
        Check::Done(l) if l.len() == 1 && l[0].spec.devices.as_ref().is_none_or(Vec::is_empty) => {
            Check::Done(())
        }
        Check::Done(l) => Check::Pending(format!(
            "{} slices with {} devices",
            l.len(),
            l.iter()
                .map(|s| s.spec.devices.as_ref().map_or(0, Vec::len))
                .sum::<usize>()
        )),
        Check::Pending(p) => Check::Pending(p),
        Check::Fail(f) => Check::Fail(f),
    }
}

/// The writes beyond `want`: counters only grow, so once one is past its
/// expectation the controller wrote what nobody asked for.
fn wrote_more(got: ControllerStats, want: ControllerStats) -> Option<String> {
    (got.creates > want.creates || got.updates > want.updates || got.deletes > want.deletes)
        .then(|| format!("the controller wrote {got}, more than the {want} expected"))
}

/// Waits until the controller's stats are `want`, then that they stay so.
async fn stats_settle(
    c: &SliceController,
    want: ControllerStats,
    rest: Duration,
) -> Result<(), WaitError> {
    wait::poll(
        &format!("the controller's writes to be {want}"),
        Duration::from_secs(30),
        Duration::from_millis(100),
        || async {
            let got = c.stats();
            if got == want {
                Check::Done(())
            } else if let Some(p) = wrote_more(got, want) {
                Check::Fail(p)
            } else {
                Check::Pending(got.to_string())
            }
        },
    )
    .await?;
    wait::consistently(
        &format!("the controller to write nothing more than {want}"),
        rest,
        Duration::from_millis(500),
        || async {
            let got = c.stats();
            if got == want {
                Ok(())
            } else {
                Err(got.to_string())
            }
        },
    )
    .await
}

async fn checks(
    client: &kube::Client,
    c: &SliceController,
    driver: &str,
    slices: usize,
    rest: Duration,
    bounds: Range<usize>,
) -> Result<(), SliceError> {
    let api: Api<ResourceSlice> = Api::all(client.clone());
    let listed = wait::poll(
        &format!("{slices} slices of {driver}"),
        Duration::from_secs(180),
        Duration::from_secs(1),
        || async { published(driver_slices_of(&api, driver).await, driver, slices) },
    )
    .await?;
    let mut sizes = Vec::new();
    for s in &listed {
        let name = s.metadata.name.clone().unwrap_or_default();
        sizes.push((name.clone(), protobuf_size(client, &name).await?));
    }
    if let Some(p) = size_problems(&sizes, &bounds) {
        return Err(SliceError::Problem(p));
    }
    let created = ControllerStats {
        creates: slices as u64,
        ..Default::default()
    };
    stats_settle(c, created, rest).await?;
    c.update(vec![Vec::new()]);
    wait::poll(
        &format!("{driver} to have one slice without devices"),
        Duration::from_secs(120),
        Duration::from_secs(1),
        || async { one_empty(driver_slices_of(&api, driver).await) },
    )
    .await?;
    // Upstream's numbers: one slice rewritten, the others deleted.
    let shrunk = ControllerStats {
        creates: slices as u64,
        updates: u64::from(slices > 0),
        deletes: slices.saturating_sub(1) as u64,
    };
    Ok(stats_settle(c, shrunk, rest).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_sizes_out_of_bounds_are_named() {
        let ok = vec![("a".to_owned(), 700 * 1024)];
        assert_eq!(size_problems(&ok, &SLICE_BYTES), None);
        let small = vec![("a".to_owned(), 700 * 1024), ("b".to_owned(), 599 * 1024)];
        let p = size_problems(&small, &SLICE_BYTES).unwrap();
        assert!(p.contains("b: 613376 bytes") && !p.contains("a:"), "{p}");
        let big = vec![("c".to_owned(), 1024 * 1024)];
        assert!(
            size_problems(&big, &SLICE_BYTES)
                .unwrap()
                .contains("c: 1048576 bytes")
        );
        assert_eq!(
            size_problems(&[], &SLICE_BYTES).as_deref(),
            Some("no slices to measure")
        );
    }

    #[test]
    fn writes_past_any_expectation_are_named() {
        let want = ControllerStats {
            creates: 10,
            ..Default::default()
        };
        assert_eq!(wrote_more(want, want), None);
        let fewer = ControllerStats {
            creates: 9,
            ..Default::default()
        };
        assert_eq!(wrote_more(fewer, want), None);
        let deleted = ControllerStats { deletes: 1, ..want };
        let p = wrote_more(deleted, want).unwrap();
        assert!(p.contains("10 creates, 0 updates, 1 deletes"), "{p}");
    }

    fn slice(name: &str, pool: &str, devices: usize) -> ResourceSlice {
        let devices: Vec<_> = (0..devices)
            .map(|i| serde_json::json!({ "name": format!("d{i}") }))
            .collect();
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": name },
            "spec": { "driver": "d", "allNodes": true, "devices": devices,
                "pool": { "name": pool, "generation": 1, "resourceSliceCount": 1 } },
        }))
        .unwrap()
    }

    #[test]
    fn more_slices_than_published_fail_at_once() {
        let two = || Check::Done(vec![slice("a", "p", 1), slice("b", "other", 1)]);
        assert!(matches!(published(two(), "d", 2), Check::Done(l) if l.len() == 2));
        assert!(matches!(published(two(), "d", 3), Check::Pending(_)));
        match published(two(), "d", 1) {
            Check::Fail(m) => assert!(
                m.starts_with("2 slices of d, more than the 1 the controller publishes: a (pool p), b (pool other)"),
                "{m}"
            ),
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    #[test]
    fn the_shrink_is_one_slice_without_devices() {
        assert!(matches!(
            one_empty(Check::Done(vec![slice("a", "p", 0)])),
            Check::Done(())
        ));
        match one_empty(Check::Done(vec![slice("a", "p", 2), slice("b", "p", 1)])) {
            Check::Pending(seen) => assert_eq!(seen, "2 slices with 3 devices"),
            other => panic!("expected pending, got {other:?}"),
        }
    }
}
