//! The catalogue's tables in the documents: docs/driver-mutants.md lists
//! the mutants, and docs/driver-conformance.md's behaviour table says which
//! mutants each scenario of the pack kills. Both are written from the
//! catalogue (`dra-e2e mutants --write-docs`) and tests hold them to it,
//! so the documents cannot claim a kill the catalogue does not.
use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context as _, bail};

use super::catalogue::Mutant;

/// Where the catalogue's table sits in docs/driver-mutants.md.
pub const DOC_BEGIN: &str = "<!-- mutants-catalogue:begin -->";
pub const DOC_END: &str = "<!-- mutants-catalogue:end -->";
pub(super) const MUTANTS_DOC: &str = "docs/driver-mutants.md";
/// Where the pack's behaviour table sits in docs/driver-conformance.md.
const BEHAVIOURS_BEGIN: &str = "<!-- behaviours:begin -->";
const BEHAVIOURS_END: &str = "<!-- behaviours:end -->";
pub(super) const BEHAVIOURS_DOC: &str = "docs/driver-conformance.md";

/// `doc` with the text between `begin` and `end` replaced by `body`.
fn between(doc: &str, begin: &str, end: &str, body: &str) -> anyhow::Result<String> {
    let (head, rest) = doc
        .split_once(begin)
        .with_context(|| format!("no {begin} marker"))?;
    let (_, tail) = rest
        .split_once(end)
        .with_context(|| format!("no {end} marker after {begin}"))?;
    Ok(format!("{head}{begin}\n{}\n{end}{tail}", body.trim_end()))
}

pub(super) fn catalogue_doc(doc: &str, mutants: &[Mutant]) -> anyhow::Result<String> {
    between(doc, DOC_BEGIN, DOC_END, &markdown(mutants))
}

/// The mutants each scenario kills: those the catalogue names it for and
/// does not expect to survive.
fn kills_by_scenario(mutants: &[Mutant]) -> BTreeMap<&str, Vec<&str>> {
    let mut out: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for m in mutants.iter().filter(|m| m.survives.is_none()) {
        for c in &m.caught_by {
            let names = out.entry(c.scenario.as_str()).or_default();
            if !names.contains(&m.name.as_str()) {
                names.push(&m.name);
            }
        }
    }
    out
}

/// The scenario a row of the behaviour table is about: its second cell,
/// less a trailing "(`Tag`)".
fn row_scenario(row: &str) -> Option<&str> {
    let cell = row.split('|').nth(2)?.trim();
    Some(cell.split_once(" (`").map_or(cell, |(name, _)| name))
}

/// The behaviour table with its last column, the mutants each behaviour
/// kills, rewritten from the catalogue. Every scenario of the pack has a
/// row and every row a scenario: the table is what the pack checks.
pub(super) fn behaviours_doc(
    doc: &str,
    mutants: &[Mutant],
    pack: &BTreeSet<String>,
) -> anyhow::Result<String> {
    let (_, rest) = doc
        .split_once(BEHAVIOURS_BEGIN)
        .with_context(|| format!("no {BEHAVIOURS_BEGIN} marker"))?;
    let (table, _) = rest
        .split_once(BEHAVIOURS_END)
        .with_context(|| format!("no {BEHAVIOURS_END} marker"))?;
    let kills = kills_by_scenario(mutants);
    let mut listed = BTreeSet::new();
    let mut out = String::from(
        "| KEP-5970 | scenario | guards against | mutants it kills |\n|---|---|---|---|\n",
    );
    for row in table
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('|'))
        .skip(2)
    {
        let scenario =
            row_scenario(row).with_context(|| format!("a row without a scenario: {row}"))?;
        listed.insert(scenario.to_owned());
        let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
        let [kep, name, guards, ..] = cells.as_slice() else {
            bail!("a row with fewer than three cells: {row}");
        };
        let killed = kills
            .get(scenario)
            .map_or("none".to_owned(), |m| m.join(", "));
        let kep = if kep.is_empty() {
            " ".to_owned()
        } else {
            format!(" {kep} ")
        };
        out.push_str(&format!("|{kep}| {name} | {guards} | {killed} |\n"));
    }
    let unknown: Vec<&String> = listed.difference(pack).collect();
    if !unknown.is_empty() {
        bail!("the behaviour table names scenarios the pack does not have: {unknown:?}");
    }
    let missing: Vec<&String> = pack.difference(&listed).collect();
    if !missing.is_empty() {
        bail!("the behaviour table has no row for the pack's scenarios {missing:?}");
    }
    between(doc, BEHAVIOURS_BEGIN, BEHAVIOURS_END, &out)
}

/// The catalogue as a Markdown table (docs/driver-mutants.md).
pub fn markdown(mutants: &[Mutant]) -> String {
    let mut out = String::from(
        "| mutant | the bug | seen in | realised by | caught by |\n|---|---|---|---|---|\n",
    );
    for m in mutants {
        let ways: Vec<String> = m.ways().iter().map(|w| w.to_string()).collect();
        let mut ways = ways.join(", ");
        if m.on_real_nodes() {
            ways.push_str(" (real nodes)");
        }
        let caught: Vec<String> = m
            .caught_by
            .iter()
            .map(|c| format!("{} (`{}`)", c.scenario, c.message))
            .collect();
        let caught = match &m.survives {
            Some(why) => format!("survives: {why}"),
            None => caught.join("; "),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {ways} | {caught} |\n",
            m.name, m.bug, m.seen
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::mutants::catalogue::tests::root;
    use crate::runner::mutants::catalogue::{PACK, catalogue, pack_scenarios};

    #[test]
    fn docs_driver_mutants_md_holds_the_catalogue() {
        let doc = std::fs::read_to_string(root().join("docs/driver-mutants.md")).unwrap();
        let (_, rest) = doc.split_once(DOC_BEGIN).unwrap();
        let (section, _) = rest.split_once(DOC_END).unwrap();
        let want = markdown(&catalogue(&root()).unwrap());
        assert!(
            section.trim() == want.trim(),
            "docs/driver-mutants.md is not the catalogue: run `make mutants-doc`"
        );
    }
    #[test]
    fn docs_driver_conformance_md_says_what_each_behaviour_kills() {
        let doc = std::fs::read_to_string(root().join(BEHAVIOURS_DOC)).unwrap();
        let pack = pack_scenarios(&root().join(PACK)).unwrap();
        let want = behaviours_doc(&doc, &catalogue(&root()).unwrap(), &pack).unwrap();
        assert!(
            doc == want,
            "docs/driver-conformance.md's behaviour table is not the pack and the catalogue: run `make mutants-doc`"
        );
    }

    #[test]
    fn the_behaviour_table_must_name_the_packs_scenarios_and_no_other() {
        let mutants = catalogue(&root()).unwrap();
        let pack = pack_scenarios(&root().join(PACK)).unwrap();
        let doc = std::fs::read_to_string(root().join(BEHAVIOURS_DOC)).unwrap();
        let renamed = doc.replacen(
            "| the kubelet registers the driver's plugin |",
            "| a scenario of no pack |",
            1,
        );
        let err = behaviours_doc(&renamed, &mutants, &pack)
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"a scenario of no pack\""), "{err}");
        let (head, rest) = doc.split_once(BEHAVIOURS_BEGIN).unwrap();
        let dropped: String = rest
            .lines()
            .filter(|l| !l.contains("| the kubelet registers the driver's plugin |"))
            .collect::<Vec<_>>()
            .join("\n");
        let err = behaviours_doc(
            &format!("{head}{BEHAVIOURS_BEGIN}{dropped}"),
            &mutants,
            &pack,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("no row for"), "{err}");
    }
}
