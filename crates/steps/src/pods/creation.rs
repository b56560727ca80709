//! Creating pods in the shapes DRA scenarios need: with an inline claim
//! from a template the step creates, with claims made before, or none, and
//! shaped further by a `| option | value |` table (containers, init
//! container, node, grace period, extended resources, which container
//! uses which claim, ...). Every option is read here, so an unknown one
//! fails the step naming those it knows.
use anyhow::{Context as _, bail};
use cucumber::gherkin::Step;
use cucumber::{given, when};

use crate::World;
use crate::claims::default_shape;
use crate::ground::objects::{self, PodClaims, PodShape};
use crate::params::{DriverRef, PodClaimsPhrase, quoted_list};

sentences! {
    #[given(expr = "pod {string} {podclaims} is created")]
    #[when(expr = "pod {string} {podclaims} is created")]
    fn pod_created(name: String, claims: PodClaimsPhrase, step: Step<'_>);

    #[when(expr = "{int} pods {string} {podclaims} are created")]
    fn pods_created(n: usize, prefix: String, claims: PodClaimsPhrase, step: Step<'_>);

    #[when(expr = "one pod per node {podclaims} is created")]
    fn pod_per_node(claims: PodClaimsPhrase, step: Step<'_>);
}

/// The template of an inline claim, as a pod step's options shape it.
struct InlineTemplate {
    name: String,
    class: Option<String>,
    selectors: Vec<String>,
    tolerations: Vec<objects::DeviceToleration>,
}

/// Reads the `| option | value |` table of a pod step into the shape.
fn apply_options(
    w: &World,
    shape: &mut PodShape,
    step: &Step,
    template: &mut Option<InlineTemplate>,
) -> anyhow::Result<()> {
    let Some(table) = &step.table else {
        return Ok(());
    };
    for row in &table.rows {
        let (key, value) = match row.as_slice() {
            [k, v] => (k.trim(), objects::expand(v.trim(), &w.vars())?),
            _ => bail!("pod options are rows of `| option | value |`, got {row:?}"),
        };
        apply_option(w, shape, template, key, value)?;
    }
    Ok(())
}

/// The template a template option shapes: only one the step creates.
fn created_template<'a>(
    template: &'a mut Option<InlineTemplate>,
    option: &str,
) -> anyhow::Result<&'a mut InlineTemplate> {
    template.as_mut().with_context(|| {
        format!("`{option}` applies to the template of an inline claim that the step creates")
    })
}

/// A node option's value: a node index of the scenario, or a node name.
fn node_of(w: &World, value: String) -> anyhow::Result<String> {
    Ok(match value.parse::<usize>() {
        Ok(i) => w.node(i)?.to_owned(),
        Err(_) => value,
    })
}

fn apply_option(
    w: &World,
    shape: &mut PodShape,
    template: &mut Option<InlineTemplate>,
    key: &str,
    value: String,
) -> anyhow::Result<()> {
    match key {
        "containers" => {
            shape.containers = value
                .parse()
                .with_context(|| format!("containers: {value:?} is not a number"))?
        }
        "containers use the claims" => shape.containers_use_claims = yes(&value)?,
        // `yes`: upstream's check of the default claim config; a list
        // of "k=v" entries: those instead.
        "init container" => {
            shape.init_container = if value.starts_with('"') {
                Some(quoted_list(&value))
            } else if value == "prints its env" {
                // No check of its own: a later step judges what it printed.
                Some(Vec::new())
            } else {
                yes(&value)?.then(|| vec![objects::DEFAULT_USER_ENV.to_owned()])
            }
        }
        "command" => shape.command = Some(value),
        "restart policy" => shape.restart_policy = value,
        "node" => shape.node_name = Some(node_of(w, value)?),
        "node selector" => shape.node_selector = Some(node_of(w, value)?),
        // Seconds the pod stays on a node reported unreachable before the
        // taint eviction controller evicts it (the default is 300 s).
        "tolerates an unreachable node for" => {
            shape.unreachable_toleration = Some(
                humantime::parse_duration(&value)
                    .map(|d| d.as_secs() as i64)
                    .with_context(|| {
                        format!("tolerates an unreachable node for: {value:?} is not a duration")
                    })?,
            )
        }
        "grace period" => {
            shape.grace_period = Some(
                humantime::parse_duration(&value)
                    .map(|d| d.as_secs() as i64)
                    .or_else(|_| value.parse())
                    .with_context(|| format!("grace period: {value:?} is not a duration"))?,
            )
        }
        "pod claim name" => shape.pod_claim_name = Some(value),
        "extended resource" => shape.extended_resources.extend(extended_resources(&value)?),
        "device class" => created_template(template, key)?.class = Some(value),
        "cel selector" => created_template(template, key)?.selectors.push(value),
        "device toleration" => created_template(template, key)?
            .tolerations
            .push(value.parse()?),
        "template" if value == "none" => *template = None,
        // An existing template (from a manifest, perhaps through an older API).
        "template" => match (&mut shape.claims, template.as_ref()) {
            (PodClaims::Inline { .. }, Some(t))
                if t.class.is_some() || !t.selectors.is_empty() || !t.tolerations.is_empty() =>
            {
                bail!(
                    "`template {value}` uses an existing template, which `device class`, \
                     `cel selector` and `device toleration` cannot shape"
                )
            }
            (PodClaims::Inline { template: name }, _) => {
                *name = value;
                *template = None;
            }
            _ => bail!("`template` applies to pods with an inline claim"),
        },
        k if k.starts_with("container ") && k.ends_with(" extended resources") => {
            let index = container_index(k, " extended resources")?;
            shape
                .container_extended_resources
                .insert(index, extended_resources(&value)?);
        }
        k if k.starts_with("container ") && k.ends_with(" claims") => {
            let index = container_index(k, " claims")?;
            let list = value
                .split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(|c| match c.split_once('/') {
                    Some((claim, req)) => (claim.to_owned(), Some(req.to_owned())),
                    None => (c.to_owned(), None),
                })
                .collect();
            shape.container_claims.insert(index, list);
        }
        other => bail!(
            "unknown pod option {other:?}; known: containers, containers use the claims, init container, \
             command, restart policy, node, node selector, grace period, tolerates an unreachable node for, \
             pod claim name, extended resource, \
             device class, cel selector, device toleration, template, container N claims, \
             container N extended resources"
        ),
    }
    Ok(())
}

/// `N` of an option `container N<suffix>`.
fn container_index(option: &str, suffix: &str) -> anyhow::Result<usize> {
    option["container ".len()..option.len() - suffix.len()]
        .trim()
        .parse()
        .with_context(|| format!("{option:?}: expected `container N{suffix}`"))
}

/// `name=quantity[, name=quantity]...`
fn extended_resources(value: &str) -> anyhow::Result<Vec<(String, String)>> {
    value
        .split(',')
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(|r| {
            let (k, v) = r
                .split_once('=')
                .with_context(|| format!("extended resource {r:?} must be name=quantity"))?;
            let v = v.trim();
            crate::harness::quantity::Quantity::parse(v)
                .with_context(|| format!("extended resource {r:?}"))?;
            Ok((k.trim().to_owned(), v.to_owned()))
        })
        .collect()
}

fn yes(v: &str) -> anyhow::Result<bool> {
    match v {
        "yes" | "true" => Ok(true),
        "no" | "false" => Ok(false),
        o => bail!("expected yes or no, got {o:?}"),
    }
}

async fn create_pod(
    w: &mut World,
    name: &str,
    claims: &PodClaimsPhrase,
    step: &Step,
) -> anyhow::Result<()> {
    let mut shape = PodShape::new(name);
    let mut template: Option<InlineTemplate> = None;
    match claims {
        PodClaimsPhrase::Inline => {
            shape.claims = PodClaims::Inline {
                template: name.to_owned(),
            };
            template = Some(InlineTemplate {
                name: name.to_owned(),
                class: None,
                selectors: Vec::new(),
                tolerations: Vec::new(),
            });
        }
        PodClaimsPhrase::External(list) => shape.claims = PodClaims::External(list.clone()),
        PodClaimsPhrase::None => {}
    }
    apply_options(w, &mut shape, step, &mut template)?;
    // The run's driver under test serves every node, not only the
    // scenario's: a one-node scenario's pods go to its node, so that "node
    // 0" in its steps is where they run.
    if shape.node_name.is_none()
        && shape.node_selector.is_none()
        && w.external_driver(&DriverRef::The).is_some()
        && let [node] = w.nodes.as_slice()
    {
        shape.node_selector = Some(node.clone());
    }
    if let Some(t) = template {
        let mut claim_shape = default_shape(w, &DriverRef::The)?;
        if let Some(c) = t.class {
            claim_shape.class = c;
        }
        claim_shape.selectors = t.selectors;
        claim_shape.tolerations = t.tolerations;
        w.create_template(&t.name, claim_shape.spec()?).await?;
    }
    let pod = shape.build()?;
    w.create_pod(&pod, shape.pod_claim_names()).await
}

async fn pod_created(
    w: &mut World,
    name: String,
    claims: PodClaimsPhrase,
    step: &Step,
) -> anyhow::Result<()> {
    create_pod(w, &name, &claims, step).await
}

async fn pods_created(
    w: &mut World,
    n: usize,
    prefix: String,
    claims: PodClaimsPhrase,
    step: &Step,
) -> anyhow::Result<()> {
    for i in 1..=n {
        create_pod(w, &format!("{prefix}-{i}"), &claims, step).await?;
    }
    Ok(())
}

async fn pod_per_node(w: &mut World, claims: PodClaimsPhrase, step: &Step) -> anyhow::Result<()> {
    for i in 1..=w.nodes.len() {
        create_pod(w, &format!("tester-{i}"), &claims, step).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extended_resources_are_names_with_quantities() {
        assert_eq!(
            extended_resources("a.com/r=1, b.com/s = 2k").expect("valid"),
            [
                ("a.com/r".to_owned(), "1".to_owned()),
                ("b.com/s".to_owned(), "2k".to_owned())
            ]
        );
        let e = extended_resources("a.com/r=1 Gi").expect_err("a bad quantity");
        assert!(
            format!("{e:#}").contains("\"1 Gi\" is not a quantity"),
            "{e:#}"
        );
        assert!(extended_resources("a.com/r").is_err());
    }
}
