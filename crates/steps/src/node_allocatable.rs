//! Node-allocatable resources of DRA devices (gate
//! DRANodeAllocatableResources), as upstream's
//! `dra_node_allocatable_resources.go` checks them: the pod's and each
//! container's cgroup values and each container's oom_score_adj, read on
//! the node by exec into the pod's containers.
use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::{then, when};
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use super::World;
use crate::cluster::proxy::exec::{ExecTarget, exec_capture};
use crate::harness::cgroup::{self, Limits, NODE_CGROUP_MOUNT, QosClass, Reading};
use crate::harness::quantity;
use crate::harness::resize;

sentences! {
    #[when(expr = "pod {string} with these containers is created:")]
    fn pod_with_containers(name: String, step: Step<'_>);

    #[then(expr = "the cgroups of pod {string} are:")]
    fn cgroups_are(name: String, step: Step<'_>);

    #[then(
        expr = "container {string} of pod {string} has the oom_score_adj of its QoS class for a memory request of {string}"
    )]
    fn oom_score_adj(container: String, pod: String, memory: String);

    /// Patches the pod's `resize` subresource and waits until the kubelet
    /// actuated it, as upstream's WaitForPodResizeActuation.
    #[when(expr = "pod {string} is resized to:")]
    fn resized(name: String, step: Step<'_>);

    #[then(expr = "pod {string} has allocated resources:")]
    fn allocated(name: String, step: Step<'_>);
}

fn table_rows(step: &cucumber::gherkin::Step, header: &[&str]) -> anyhow::Result<Vec<Vec<String>>> {
    let want = format!("| {} |", header.join(" | "));
    let table = step
        .table
        .as_ref()
        .with_context(|| format!("this step needs a table {want}"))?;
    let Some((head, rows)) = table.rows.split_first() else {
        bail!("the table is empty; it needs {want}");
    };
    if head.iter().map(String::as_str).ne(header.iter().copied()) {
        bail!("the table's header must be {want}, got {head:?}");
    }
    Ok(rows.to_vec())
}

async fn pod_with_containers(
    w: &mut World,
    name: String,
    step: &cucumber::gherkin::Step,
) -> anyhow::Result<()> {
    let rows = table_rows(step, &["container", "resources", "claims"])?;
    let (pod, claims) = resize::test_pod(&name, &rows)?;
    w.create_pod(&pod, claims).await
}

/// A cgroup row's values in upstream's terms: the resources the kubelet
/// should have written (`cpu request 3000m, cpu limit 5000m, memory limit
/// 5096Mi`; `none` for nothing set).
fn limits(cell: &str) -> anyhow::Result<Limits> {
    let mut l = Limits::default();
    let cell = cell.trim();
    if cell == "none" || cell.is_empty() {
        return Ok(l);
    }
    for item in cell.split(',').map(str::trim) {
        let words: Vec<&str> = item.split_whitespace().collect();
        let (slot, q) = match words[..] {
            ["cpu", "request", q] => (&mut l.cpu_request, quantity::milli(q)?),
            ["cpu", "limit", q] => (&mut l.cpu_limit, quantity::milli(q)?),
            ["memory", "limit", q] => (&mut l.memory_limit, quantity::value(q)?),
            _ => bail!(
                "{item:?} must be `cpu request Q`, `cpu limit Q` or `memory limit Q` (or the cell `none`)"
            ),
        };
        *slot = Some(q);
    }
    Ok(l)
}

async fn exec(w: &World, pod: &str, container: &str, script: &str) -> anyhow::Result<String> {
    let target = ExecTarget {
        namespace: w.namespace.clone(),
        pod: pod.to_owned(),
        container: container.to_owned(),
    };
    let out = exec_capture(
        &w.client()?,
        &target,
        vec!["/bin/sh".into(), "-c".into(), script.into()],
    )
    .await?;
    Ok(out.stdout)
}

async fn cgroups_are(
    w: &mut World,
    name: String,
    step: &cucumber::gherkin::Step,
) -> anyhow::Result<()> {
    let rows = table_rows(step, &["cgroup", "values"])?;
    let pod = w.pod(&name).await?;
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let spec = pod.spec.clone().unwrap_or_default();
    let Some(first) = spec.containers.first() else {
        bail!("pod {name} has no containers");
    };
    let mut problems = Vec::new();
    for row in &rows {
        let [who, cell] = &row[..] else {
            bail!("each row is | cgroup | values |, got {row:?}");
        };
        let want = limits(cell)?;
        let (exec_in, uid, spec_request, label) = if who == "pod" {
            (
                first.name.clone(),
                Some(uid.as_str()),
                0,
                format!("pod {name}"),
            )
        } else {
            let c = spec
                .containers
                .iter()
                .find(|c| &c.name == who)
                .with_context(|| format!("pod {name} has no container {who:?}"))?;
            let request = c
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get("cpu"))
                .map(|q| quantity::milli(&q.0))
                .transpose()?
                .unwrap_or(0);
            (
                c.name.clone(),
                None,
                request,
                format!("container {who} of pod {name}"),
            )
        };
        let out = exec(w, &name, &exec_in, &cgroup::read_script(uid)).await?;
        let got = Reading::parse(&out);
        if uid.is_some() && got.dir().is_none() {
            bail!(
                "no cgroup of pod {name} (UID {uid:?}) found under the node's cgroup tree \
                 mounted at {NODE_CGROUP_MOUNT} in container {exec_in}; the script printed {out:?}",
                uid = pod.metadata.uid
            );
        }
        let files = cgroup::expected_files(&want, spec_request, got.version());
        problems.extend(
            got.mismatches(&files)
                .into_iter()
                .map(|m| format!("{label}: {m}")),
        );
    }
    if !problems.is_empty() {
        bail!("{}", problems.join("; "));
    }
    Ok(())
}

async fn oom_score_adj(
    w: &mut World,
    container: String,
    pod: String,
    memory: String,
) -> anyhow::Result<()> {
    let p = w.pod(&pod).await?;
    let status = p.status.clone().unwrap_or_default();
    let qos = status.qos_class.clone().unwrap_or_default();
    let node_name = p
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .with_context(|| format!("pod {pod} is not on a node"))?;
    let capacity = cgroup::node_memory(&w.client()?, &node_name).await?;
    let node_memory = quantity::value(&capacity)?;
    let Some(class) = QosClass::of_status(&qos) else {
        bail!("pod {pod} has no QoS class yet ({qos:?})");
    };
    let request = match class {
        QosClass::Burstable => quantity::value(&memory)?,
        QosClass::Guaranteed | QosClass::BestEffort => 0,
    };
    let want = cgroup::oom_score_adj(class, request, node_memory);
    let why = match class {
        QosClass::Burstable => {
            format!("Burstable: 1000 - 1000 × {memory} / {capacity} node memory, at least 2")
        }
        other => format!("{other:?}"),
    };
    let out = exec(w, &pod, &container, "cat /proc/1/oom_score_adj").await?;
    let got = out.trim();
    if got != want.to_string() {
        bail!(
            "container {container} of pod {pod}: oom_score_adj is {got}, expected {want} ({why})"
        );
    }
    Ok(())
}

/// A resource list (`cpu 1500m, memory 2000Mi`) in thousandths, by name.
fn resource_list(cell: &str) -> anyhow::Result<BTreeMap<String, i128>> {
    let cell = cell.trim();
    if cell == "none" || cell == "-" || cell.is_empty() {
        return Ok(BTreeMap::new());
    }
    cell.split(',')
        .map(str::trim)
        .map(|item| {
            let (name, q) = item
                .split_once(' ')
                .with_context(|| format!("{item:?} must be `<resource> <quantity>`"))?;
            Ok((name.to_owned(), quantity::milli(q)?))
        })
        .collect()
}

fn list_of(
    got: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> anyhow::Result<BTreeMap<String, i128>> {
    got.into_iter()
        .flatten()
        .map(|(k, q)| Ok((k.clone(), quantity::milli(&q.0)?)))
        .collect()
}

fn show(list: &BTreeMap<String, i128>) -> String {
    if list.is_empty() {
        return "nothing".to_owned();
    }
    list.iter()
        .map(|(k, v)| {
            if k == "cpu" {
                format!("{k} {v}m")
            } else {
                format!("{k} {}", cgroup::mebi(*v / 1000))
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

async fn resized(
    w: &mut World,
    name: String,
    step: &cucumber::gherkin::Step,
) -> anyhow::Result<()> {
    let rows = table_rows(step, &["container", "resources"])?;
    let pod = w.pod(&name).await?;
    let patch = resize::patch(&pod, &rows)?;
    let pod = resize::resize(&w.api::<Pod>()?, &name, &patch, Duration::from_secs(300)).await?;
    // Upstream's VerifyPodResources: the spec holds what was asked for.
    let problems = spec_differences(&pod, &rows)?;
    if !problems.is_empty() {
        bail!(
            "after the resize, pod {name}'s spec does not hold the resources asked for: {}",
            problems.join("; ")
        );
    }
    Ok(())
}

/// Where the pod's spec differs from the `| container | resources |` rows
/// (requests and limits, compared as quantities).
fn spec_differences(pod: &Pod, rows: &[Vec<String>]) -> anyhow::Result<Vec<String>> {
    let spec = pod.spec.clone().unwrap_or_default();
    let mut problems = Vec::new();
    for row in rows {
        let [who, cell] = &row[..] else {
            bail!("each row is | container | resources |, got {row:?}");
        };
        let have = if who == "pod" {
            spec.resources.clone()
        } else {
            spec.containers
                .iter()
                .find(|c| &c.name == who)
                .with_context(|| format!("pod has no container {who:?}"))?
                .resources
                .clone()
        }
        .unwrap_or_default();
        let want = resize::requirements(cell)?;
        for (key, got) in [("requests", &have.requests), ("limits", &have.limits)] {
            let want: BTreeMap<String, i128> = want
                .get(key)
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .map(|(r, q)| Ok((r.clone(), quantity::milli(q.as_str().unwrap_or_default())?)))
                .collect::<anyhow::Result<_>>()?;
            let got = list_of(got.as_ref())?;
            if got != want {
                problems.push(format!(
                    "{who}: {key} are {}, expected {}",
                    show(&got),
                    show(&want)
                ));
            }
        }
    }
    Ok(problems)
}

async fn allocated(
    w: &mut World,
    name: String,
    step: &cucumber::gherkin::Step,
) -> anyhow::Result<()> {
    let rows = table_rows(step, &["allocation", "resources"])?;
    let status = w.pod(&name).await?.status.unwrap_or_default();
    let mut problems = Vec::new();
    for row in &rows {
        let [who, cell] = &row[..] else {
            bail!("each row is | allocation | resources |, got {row:?}");
        };
        if cell == "(not checked)" {
            continue;
        }
        let want = resource_list(cell)?;
        let (got, label) = if who == "pod" {
            (
                list_of(status.allocated_resources.as_ref())?,
                format!("pod {name}"),
            )
        } else {
            let c = status
                .container_statuses
                .iter()
                .flatten()
                .find(|c| &c.name == who)
                .with_context(|| format!("pod {name} has no status of container {who:?}"))?;
            (
                list_of(c.allocated_resources.as_ref())?,
                format!("container {who} of pod {name}"),
            )
        };
        if got != want {
            problems.push(format!(
                "{label}: allocatedResources are {}, expected {}",
                show(&got),
                show(&want)
            ));
        }
    }
    if !problems.is_empty() {
        bail!("{}", problems.join("; "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_cells_read_into_limits() {
        assert_eq!(
            limits("cpu request 3000m, cpu limit 5, memory limit 5096Mi").expect("valid"),
            Limits {
                cpu_request: Some(3000),
                cpu_limit: Some(5000),
                memory_limit: Some(5096 << 20),
            }
        );
        assert_eq!(limits("none").expect("valid"), Limits::default());
        assert!(limits("cpu 1").is_err());
        let e = limits("cpu limit 1 Gi").expect_err("a space in a quantity");
        assert!(e.to_string().contains("cpu limit 1 Gi"), "{e}");
        let e = limits("memory limit 1Gb").expect_err("no such suffix");
        assert!(e.to_string().contains("\"1Gb\" is not a quantity"), "{e}");
    }

    /// Table rows as the steps get them.
    fn rows<const N: usize>(r: &[[&str; N]]) -> Vec<Vec<String>> {
        r.iter()
            .map(|r| r.iter().map(|s| (*s).to_owned()).collect())
            .collect()
    }

    /// A pod without pod-level resources and a container c1 using claim a.
    fn pod_with_c1() -> Pod {
        let (pod, _) = resize::test_pod(
            "p",
            &rows(&[["pod", "none", "-"], ["c1", "cpu 1/2, memory 1Gi/2Gi", "a"]]),
        )
        .expect("valid");
        pod
    }

    #[test]
    fn the_spec_check_compares_quantities_and_names_what_differs() {
        let pod = pod_with_c1();
        let two = |c: &str| vec![vec!["c1".to_owned(), c.to_owned()]];
        assert!(
            spec_differences(&pod, &two("cpu 1000m/2, memory 1024Mi/2Gi"))
                .expect("valid")
                .is_empty()
        );
        assert_eq!(
            spec_differences(&pod, &two("cpu 1/3, memory 1Gi/2Gi")).expect("valid"),
            ["c1: limits are cpu 2000m, memory 2048Mi, expected cpu 3000m, memory 2048Mi"]
        );
    }

    #[test]
    fn resource_lists_read_in_thousandths() {
        assert_eq!(
            resource_list("cpu 1500m, memory 2000Mi").expect("valid"),
            BTreeMap::from([
                ("cpu".to_owned(), 1500),
                ("memory".to_owned(), 2000 * (1000 << 20))
            ])
        );
        assert_eq!(
            show(&resource_list("cpu 3, memory 3Gi").expect("valid")),
            "cpu 3000m, memory 3072Mi"
        );
    }
}
