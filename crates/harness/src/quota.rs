//! A ResourceQuota's status as the scenarios check it: what it reports
//! used of one resource, or exactly its hard and used amounts, compared in
//! milli-units so that `1` and `1000m` are the same amount.
use std::time::Duration;

use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::Api;

use dra_e2e_kube::wait::{self, Check, WaitError};

/// `resource -> milli-units` of a quota status list, or the problem.
pub type Amounts = std::collections::BTreeMap<String, i128>;

fn amounts(
    list: Option<
        &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >,
) -> Result<Amounts, String> {
    list.into_iter()
        .flatten()
        .map(|(k, q)| {
            crate::quantity::milli(&q.0)
                .map(|v| (k.clone(), v))
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// Waits until quota `name` reports `used` of `resource` used.
pub async fn reports_used(
    quotas: &Api<ResourceQuota>,
    name: &str,
    resource: &str,
    used: i64,
    timeout: Duration,
) -> Result<(), WaitError> {
    let what = format!("quota {name} to report {used} {resource} used");
    wait::object(quotas, name, &what, timeout, |q| {
        let got = q
            .and_then(|q| q.status.as_ref())
            .and_then(|s| s.used.as_ref())
            .and_then(|u| u.get(resource))
            .map(|v| v.0.clone());
        if got.as_deref() == Some(used.to_string().as_str()) {
            Check::Done(())
        } else {
            Check::Pending(format!("used {resource} = {got:?}"))
        }
    })
    .await
}

/// Waits until quota `name` has exactly `hard` and `used` in its status,
/// no resource more or less.
pub async fn has_status(
    quotas: &Api<ResourceQuota>,
    name: &str,
    hard: &Amounts,
    used: &Amounts,
    timeout: Duration,
) -> Result<(), WaitError> {
    let what =
        format!("quota {name} to have exactly hard {hard:?} and used {used:?} (milli-units)");
    wait::object(quotas, name, &what, timeout, |q| {
        let status = q.and_then(|q| q.status.as_ref());
        let got = status.map(|s| (amounts(s.hard.as_ref()), amounts(s.used.as_ref())));
        match got {
            Some((Ok(h), Ok(u))) if &h == hard && &u == used => Check::Done(()),
            Some((h, u)) => Check::Pending(format!("hard {h:?}, used {u:?}")),
            None => Check::Pending("no status".to_owned()),
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    /// `1` and `1000m` are one amount; a quantity that does not parse is
    /// named rather than read as zero.
    #[test]
    fn amounts_compare_in_milli_units_and_name_what_does_not_parse() {
        let list: std::collections::BTreeMap<String, Quantity> = [
            ("a".to_owned(), Quantity("1".into())),
            ("b".to_owned(), Quantity("1500m".into())),
        ]
        .into_iter()
        .collect();
        let got = amounts(Some(&list)).unwrap();
        assert_eq!(got["a"], 1000);
        assert_eq!(got["b"], 1500);
        assert!(amounts(None).unwrap().is_empty());
        let bad: std::collections::BTreeMap<String, Quantity> =
            [("c".to_owned(), Quantity("lots".into()))]
                .into_iter()
                .collect();
        let err = amounts(Some(&bad)).unwrap_err();
        assert!(err.contains("lots"), "{err}");
    }
}
