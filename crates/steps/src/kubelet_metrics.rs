//! What a node's kubelet reports in its own metrics, as upstream's node
//! suite checks `dra_resource_claims_in_use` per driver.
use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::gherkin::Step;
use cucumber::then;

use super::World;
use super::params::NodeSel;
use crate::ground::objects;
use crate::harness::kubelet_metrics;

sentences! {
    /// The table's header names the label (`driver_name`) and `value`; the
    /// metric has exactly the table's samples, as upstream's
    /// `MatchAllElements`.
    #[then(expr = "the kubelet on {node} reports metric {string}:")]
    fn reports_metric(node: NodeSel, metric: String, step: Step<'_>);
}

/// How long the kubelet's gauges may take to catch up with the pods: they
/// are computed when read, so this only covers the read itself.
const METRICS_TIMEOUT: Duration = Duration::from_secs(30);

/// The samples a table asks for, by the value of its label column.
fn wanted(w: &World, step: &Step) -> anyhow::Result<(String, BTreeMap<String, f64>)> {
    let table = step
        .table
        .as_ref()
        .context("this step needs a table: | <label> | value |")?;
    let mut rows = table.rows.iter();
    let header = rows.next().context("the metric's table is empty")?;
    let [label, value] = header.as_slice() else {
        bail!("the metric's table has two columns, a label and `value`; its header is {header:?}");
    };
    if value.trim() != "value" {
        bail!("the metric's table's second column is `value`, not {value:?}");
    }
    let vars = w.vars();
    let mut want = BTreeMap::new();
    for row in rows {
        let key = objects::expand(row[0].trim(), &vars)?;
        let v: f64 = row[1]
            .trim()
            .parse()
            .with_context(|| format!("the value {:?} of {key} is no number", row[1]))?;
        want.insert(key, v);
    }
    Ok((label.trim().to_owned(), want))
}

async fn reports_metric(
    w: &World,
    node: NodeSel,
    metric: String,
    step: &Step,
) -> anyhow::Result<()> {
    let (label, want) = wanted(w, step)?;
    let client = w.client()?;
    for n in node.resolve(w).await? {
        kubelet_metrics::reports(&client, &n, &metric, &label, &want, METRICS_TIMEOUT).await?;
    }
    Ok(())
}
