//! The kubelet's own metrics, read through the API server's node proxy
//! (`/api/v1/nodes/<node>/proxy/metrics`), as upstream's node suite reads
//! them from the kubelet's port: the way that works on any cluster whose
//! API server can reach its kubelets (it also serves `kubectl logs`).
//!
//! Only what scenarios compare is parsed: the samples of one metric in the
//! Prometheus text format, by the value of one label.
use std::collections::BTreeMap;
use std::time::Duration;

use kube::Client;

use dra_e2e_kube::wait::{self, Check, WaitError};

#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("reading the metrics of the kubelet on {node} through the API server: {source}")]
    Read {
        node: String,
        #[source]
        source: kube::Error,
    },
    #[error("line {line} of the kubelet's metrics: {reason}: {text:?}")]
    Parse {
        line: usize,
        reason: &'static str,
        text: String,
    },
}

/// The kubelet's metrics page as text.
pub async fn read(client: &Client, node: &str) -> Result<String, MetricsError> {
    let req = http::Request::get(format!("/api/v1/nodes/{node}/proxy/metrics"))
        .body(Vec::new())
        .map_err(|e| MetricsError::Read {
            node: node.to_owned(),
            source: kube::Error::HttpError(e),
        })?;
    client
        .request_text(req)
        .await
        .map_err(|source| MetricsError::Read {
            node: node.to_owned(),
            source,
        })
}

/// The samples of `metric` keyed by the value of `label` (a sample without
/// the label is keyed by the empty string). Comment lines and other metrics
/// are passed over; a sample of `metric` that cannot be read is an error,
/// so a format change shows instead of reading as "no samples".
pub fn samples_by_label(
    text: &str,
    metric: &str,
    label: &str,
) -> Result<BTreeMap<String, f64>, MetricsError> {
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix(metric) else {
            continue;
        };
        let err = |reason| MetricsError::Parse {
            line: i + 1,
            reason,
            text: line.to_owned(),
        };
        // Another metric whose name starts with this one's.
        let (labels, value) = if let Some(rest) = rest.strip_prefix('{') {
            let (labels, value) = rest
                .split_once('}')
                .ok_or_else(|| err("no closing brace"))?;
            (labels, value)
        } else if rest.starts_with(' ') {
            ("", rest)
        } else {
            continue;
        };
        let value = value
            .split_whitespace()
            .next()
            .ok_or_else(|| err("no value"))?;
        let value: f64 = value.parse().map_err(|_| err("the value is no number"))?;
        let key = label_value(labels, label).map_err(err)?.unwrap_or_default();
        out.insert(key, value);
    }
    Ok(out)
}

/// Polls the kubelet on `node` (its metrics are computed when read: there
/// is no watch) until the samples of `metric` keyed by `label` are exactly
/// `want`, as upstream's `MatchAllElements`.
pub async fn reports(
    client: &Client,
    node: &str,
    metric: &str,
    label: &str,
    want: &BTreeMap<String, f64>,
    timeout: Duration,
) -> Result<(), WaitError> {
    let what = format!("the kubelet on {node} to report {metric} by {label} as {want:?}");
    wait::poll(&what, timeout, Duration::from_millis(500), || async {
        let text = read(client, node).await;
        samples_are(text, metric, label, want)
    })
    .await
}

/// The named condition of [`reports`] over one read of the page: a read
/// that failed is pending (the kubelet may be starting), a page whose
/// samples cannot be parsed fails.
fn samples_are(
    text: Result<String, MetricsError>,
    metric: &str,
    label: &str,
    want: &BTreeMap<String, f64>,
) -> Check<()> {
    let text = match text {
        Ok(t) => t,
        Err(e) => return Check::Pending(e.to_string()),
    };
    match samples_by_label(&text, metric, label) {
        Ok(got) if &got == want => Check::Done(()),
        Ok(got) => Check::Pending(format!("{got:?}")),
        Err(e) => Check::Fail(e.to_string()),
    }
}

/// The value of `name` in `k="v",k2="v2"`; quotes inside values are escaped
/// with a backslash.
fn label_value(labels: &str, name: &str) -> Result<Option<String>, &'static str> {
    let mut rest = labels.trim();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=').ok_or("a label without `=`")?;
        let after = after
            .strip_prefix('"')
            .ok_or("a label value without quotes")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => return Err("a label value ends in a backslash"),
                },
                Some((at, '"')) => break at,
                Some((_, c)) => value.push(c),
                None => return Err("a label value without its closing quote"),
            }
        };
        if key.trim() == name {
            return Ok(Some(value));
        }
        rest = after[end + 1..].trim_start_matches(',').trim();
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"# HELP dra_resource_claims_in_use [ALPHA] The number of ResourceClaims that are currently in use on the node, by driver name (driver_name label value) and across all drivers (special value <any> for driver_name).
# TYPE dra_resource_claims_in_use gauge
dra_resource_claims_in_use{driver_name="<any>"} 1
dra_resource_claims_in_use{driver_name="a.k8s.io"} 1
dra_resource_claims_in_use_total{driver_name="x"} 7
dra_operations_duration_seconds_bucket{is_error="false",operation_name="PrepareResources",le="0.1"} 3
"#;

    #[test]
    fn samples_of_one_metric_by_label() {
        let got = samples_by_label(PAGE, "dra_resource_claims_in_use", "driver_name").unwrap();
        assert_eq!(
            got,
            BTreeMap::from([("<any>".to_owned(), 1.0), ("a.k8s.io".to_owned(), 1.0)])
        );
        assert!(
            samples_by_label(PAGE, "no_such_metric", "driver_name")
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn labels_with_escapes_and_several_keys() {
        assert_eq!(
            label_value(r#"a="x\"y",driver_name="d""#, "driver_name"),
            Ok(Some("d".to_owned()))
        );
        assert_eq!(label_value(r#"a="x\"y""#, "a"), Ok(Some("x\"y".to_owned())));
        assert_eq!(label_value("a=\"x\"", "b"), Ok(None));
    }

    #[test]
    fn the_samples_must_be_exactly_the_wanted_ones() {
        let m = "dra_resource_claims_in_use";
        let mut want = BTreeMap::from([("<any>".to_owned(), 1.0), ("a.k8s.io".to_owned(), 1.0)]);
        let page = || Ok(PAGE.to_owned());
        assert!(matches!(
            samples_are(page(), m, "driver_name", &want),
            Check::Done(())
        ));
        want.insert("b.k8s.io".to_owned(), 0.0);
        match samples_are(page(), m, "driver_name", &want) {
            Check::Pending(seen) => assert!(seen.contains("a.k8s.io"), "{seen}"),
            other => panic!("expected pending, got {other:?}"),
        }
        let failed_read = Err(MetricsError::Parse {
            line: 1,
            reason: "r",
            text: String::new(),
        });
        assert!(matches!(
            samples_are(failed_read, m, "driver_name", &want),
            Check::Pending(_)
        ));
        assert!(matches!(
            samples_are(
                Ok("m{driver_name=d} 1\n".to_owned()),
                "m",
                "driver_name",
                &want
            ),
            Check::Fail(_)
        ));
    }

    #[test]
    fn an_unreadable_sample_is_an_error() {
        let e = samples_by_label("m{driver_name=\"d\"} many\n", "m", "driver_name").unwrap_err();
        assert!(e.to_string().contains("line 1"), "{e}");
        assert!(samples_by_label("m{driver_name=d} 1\n", "m", "driver_name").is_err());
    }
}
