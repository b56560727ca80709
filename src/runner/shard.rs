//! `--shard I/N`: a deterministic 1/N of the selected scenarios, so a CI
//! matrix can split the suite. A scenario's shard follows from its own
//! identity (feature, rule, title, example row) through a fixed hash, so it
//! stays put when scenarios are added, removed or moved elsewhere.
use cucumber::gherkin;

/// One of N shards, counted from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    index: u64,
    count: u64,
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let usage = || format!("{s:?} is not a shard: give I/N, e.g. 2/4 for the second of four");
        let (i, n) = s.split_once('/').ok_or_else(usage)?;
        let index: u64 = i.trim().parse().map_err(|_| usage())?;
        let count: u64 = n.trim().parse().map_err(|_| usage())?;
        if count == 0 {
            return Err(format!("{s:?}: the number of shards must be 1 or more"));
        }
        if index == 0 || index > count {
            return Err(format!("{s:?}: shards count from 1, so I is 1 to {count}"));
        }
        Ok(Shard { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// Whether the scenario with this identity belongs to the shard.
    pub fn holds(&self, identity: &str) -> bool {
        fnv1a(identity.as_bytes()) % self.count == self.index - 1
    }

    /// The features with only this shard's scenarios (features and rules
    /// left empty are dropped).
    pub fn apply(&self, features: Vec<gherkin::Feature>) -> Vec<gherkin::Feature> {
        features
            .into_iter()
            .filter_map(|mut f| {
                let name = f.name.clone();
                f.scenarios
                    .retain(|s| self.holds(&identity(&name, None, s)));
                for r in &mut f.rules {
                    let rule = r.name.clone();
                    r.scenarios
                        .retain(|s| self.holds(&identity(&name, Some(&rule), s)));
                }
                f.rules.retain(|r| !r.scenarios.is_empty());
                (!f.scenarios.is_empty() || !f.rules.is_empty()).then_some(f)
            })
            .collect()
    }
}

/// What names a scenario independently of where its file is and what else
/// it holds: feature, rule, title and (for an outline's row) the row.
fn identity(feature: &str, rule: Option<&str>, s: &gherkin::Scenario) -> String {
    let row: Vec<&str> = s
        .examples
        .first()
        .and_then(|e| e.table.as_ref())
        .and_then(|t| t.rows.get(1))
        .map(|r| r.iter().map(String::as_str).collect())
        .unwrap_or_default();
    format!(
        "{feature}\n{}\n{}\n{}",
        rule.unwrap_or_default(),
        s.name,
        row.join("\t")
    )
}

/// FNV-1a, 64 bits: fixed across platforms and Rust versions, unlike std's
/// hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse_from_one_to_n() {
        assert_eq!("2/4".parse::<Shard>().unwrap().to_string(), "2/4");
        for bad in ["0/3", "4/3", "1/0", "x/2", "3", "1/2/3"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        let e = "0/3".parse::<Shard>().unwrap_err();
        assert!(e.contains("shards count from 1"), "{e}");
    }

    #[test]
    fn every_identity_is_in_exactly_one_shard() {
        let shards: Vec<Shard> = (1..=3).map(|i| format!("{i}/3").parse().unwrap()).collect();
        let mut sizes = [0; 3];
        for n in 0..300 {
            let id = format!("feature\n\nscenario {n}\n");
            let holding: Vec<usize> = (0..3).filter(|i| shards[*i].holds(&id)).collect();
            assert_eq!(holding.len(), 1, "{id:?} in {holding:?}");
            sizes[holding[0]] += 1;
        }
        // Roughly even: no shard gets less than half its share.
        assert!(sizes.iter().all(|s| *s > 50), "{sizes:?}");
    }

    #[test]
    fn the_hash_is_fixed() {
        // FNV-1a's published test vector: a shard must not move between
        // builds.
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}

/// Generated `--shard` values: a shard, or a refusal quoting the value;
/// a shard printed reads back; every scenario is in exactly one shard.
/// `PROPTEST_CASES` raises the bounded count (`make props-long`).
#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    fn text() -> impl Strategy<Value = String> {
        let word = proptest::sample::select(vec![
            "/",
            "0",
            "1",
            "3",
            " ",
            "+",
            "-",
            "18446744073709551616",
        ]);
        let piece = prop_oneof![
            word.prop_map(str::to_owned),
            any::<char>().prop_map(String::from)
        ];
        proptest::collection::vec(piece, 0..8).prop_map(|p| p.concat())
    }

    proptest! {
        // Failures are kept as plain tests beside these, not in files.
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn any_value_is_a_shard_or_refused_quoting_it(s in text()) {
            match s.parse::<Shard>() {
                Ok(shard) => prop_assert!(shard.index >= 1 && shard.index <= shard.count),
                Err(e) => prop_assert!(e.starts_with(&format!("{s:?}")), "{e}"),
            }
        }

        #[test]
        fn shards_read_back_and_split_every_scenario_once(
            count in 1u64..64,
            pick in any::<u64>(),
            identity in any::<String>(),
        ) {
            let index = pick % count + 1;
            let shard: Shard = format!("{index}/{count}").parse().map_err(TestCaseError::fail)?;
            prop_assert_eq!(shard.to_string().parse::<Shard>(), Ok(shard));
            let holding = (1..=count)
                .filter(|i| Shard { index: *i, count }.holds(&identity))
                .count();
            prop_assert_eq!(holding, 1);
        }
    }
}
