//! Which scenario of run B stands for which of run A when `compare` pairs their results
//! ([`crate::summary::compare_paired`]). Scenarios of the same name pair as themselves; of the
//! others, in this order:
//!
//! 1. the pairs the user chose (`compare --scenario A=B`);
//! 2. scenarios with the same target (as [`RunMeta::targets`] recorded it), when each run has
//!    one such scenario left;
//! 3. when each run has one scenario in all (a `run --target` against an experiment's named
//!    scenario), those two.
//!
//! Nothing else is guessed: two scenarios of one run with the same target pair with none.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::record::RunResult;
use crate::summary::RunMeta;
use crate::target::described_label;

/// Why a scenario of B was paired with a differently named one of A.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PairedBy {
    /// The user chose it (`compare --scenario A=B`).
    Choice,
    /// Both ran the same target, and neither run has another scenario left with it.
    Target,
    /// Each run has one scenario.
    OneEach,
}

/// A scenario of B paired with a differently named one of A: B's results are compared as if
/// they had A's scenario, and the comparison's lists name A's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioPair {
    pub a: String,
    pub b: String,
    pub by: PairedBy,
    /// The target both ran, when they were paired by it ([`described_label`]'s text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// What one run ran, as pairing needs it: the scenarios its results have and, when its meta
/// recorded them, their targets.
#[derive(Debug, Clone, Default)]
pub struct Ran {
    scenarios: BTreeMap<String, Option<Value>>,
}

impl Ran {
    /// The scenarios of `results`, with their targets from `meta` where it has them.
    pub fn of(results: &[RunResult], meta: Option<&RunMeta>) -> Self {
        let names: BTreeSet<&str> = results.iter().map(|r| r.scenario.as_str()).collect();
        Self::of_scenarios(names.into_iter().map(str::to_owned), meta)
    }

    /// The scenarios named, with their targets from `meta` where it has them.
    pub fn of_scenarios(names: impl IntoIterator<Item = String>, meta: Option<&RunMeta>) -> Self {
        let targets: BTreeMap<&str, &Value> =
            meta.map(|m| m.scenarios.iter().map(String::as_str).zip(&m.targets).collect()).unwrap_or_default();
        let scenarios = names
            .into_iter()
            .map(|name| {
                let target = targets.get(name.as_str()).map(|t| (*t).clone());
                (name, target)
            })
            .collect();
        Self { scenarios }
    }

    fn has(&self, name: &str) -> bool {
        self.scenarios.contains_key(name)
    }
}

/// A `--scenario A=B` that cannot be followed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`--scenario {a}={b}`: {problem}")]
pub struct ChoiceError {
    pub a: String,
    pub b: String,
    pub problem: String,
}

/// The scenarios of B that stand for differently named ones of A (see the module's rules), the
/// `chosen` ones first. A choice must name a scenario of each run, each at most once; and A's
/// name may not also be a scenario of B that is not chosen itself (its results would be B's
/// under two names).
pub fn pair_scenarios(a: &Ran, b: &Ran, chosen: &[(String, String)]) -> Result<Vec<ScenarioPair>, ChoiceError> {
    let names = |ran: &Ran| ran.scenarios.keys().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
    let mut pairs: Vec<ScenarioPair> = Vec::new();
    for (x, y) in chosen {
        let refuse = |problem: String| ChoiceError { a: x.clone(), b: y.clone(), problem };
        if !a.has(x) {
            return Err(refuse(format!("run A has no results of a scenario `{x}` (it has {})", names(a))));
        }
        if !b.has(y) {
            return Err(refuse(format!("run B has no results of a scenario `{y}` (it has {})", names(b))));
        }
        if pairs.iter().any(|p| p.a == *x || p.b == *y) {
            return Err(refuse("each scenario may be chosen once".to_owned()));
        }
        pairs.push(ScenarioPair { a: x.clone(), b: y.clone(), by: PairedBy::Choice, target: None });
    }
    for pair in &pairs {
        if b.has(&pair.a) && pair.a != pair.b && !pairs.iter().any(|p| p.b == pair.a) {
            return Err(ChoiceError {
                a: pair.a.clone(),
                b: pair.b.clone(),
                problem: format!(
                    "run B also has a scenario `{0}`, which would pair with A's by name; choose its pair too \
                     (`--scenario OTHER={0}`)",
                    pair.a
                ),
            });
        }
    }
    // Chosen names and names both runs have are taken; the rest may pair by target.
    let left = |ran: &Ran, other: &Ran, side_of: fn(&ScenarioPair) -> &String| -> Vec<(String, Option<Value>)> {
        ran.scenarios
            .iter()
            .filter(|(name, _)| !other.has(name) && !pairs.iter().any(|p| side_of(p) == *name))
            .map(|(name, target)| (name.clone(), target.clone()))
            .collect()
    };
    let (left_a, left_b) = (left(a, b, |p| &p.a), left(b, a, |p| &p.b));
    let mut by_target = Vec::new();
    for (name, target) in &left_a {
        let Some(target) = target else { continue };
        let same = |side: &[(String, Option<Value>)]| side.iter().filter(|(_, t)| t.as_ref() == Some(target)).count();
        if same(&left_a) != 1 || same(&left_b) != 1 {
            continue;
        }
        if let Some((other, _)) = left_b.iter().find(|(_, t)| t.as_ref() == Some(target)) {
            by_target.push(ScenarioPair {
                a: name.clone(),
                b: other.clone(),
                by: PairedBy::Target,
                target: Some(described_label(target)),
            });
        }
    }
    pairs.extend(by_target);
    if pairs.is_empty() && a.scenarios.len() == 1 && b.scenarios.len() == 1 {
        if let (Some(x), Some(y)) = (a.scenarios.keys().next(), b.scenarios.keys().next())
            && x != y
        {
            pairs.push(ScenarioPair { a: x.clone(), b: y.clone(), by: PairedBy::OneEach, target: None });
        }
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::tests::{meta, passing};

    fn ran(scenarios: &[(&str, &str)]) -> Ran {
        let results: Vec<RunResult> = scenarios.iter().map(|(name, _)| passing("c1", name, 0)).collect();
        let mut meta = meta(&scenarios.iter().map(|(n, _)| *n).collect::<Vec<_>>(), 1);
        meta.targets = scenarios.iter().map(|(_, url)| serde_json::json!({"kind": "http", "url": url})).collect();
        Ran::of(&results, Some(&meta))
    }

    fn pairs(a: &Ran, b: &Ran, chosen: &[(&str, &str)]) -> Vec<(String, String, PairedBy)> {
        let chosen: Vec<(String, String)> = chosen.iter().map(|(x, y)| ((*x).to_owned(), (*y).to_owned())).collect();
        pair_scenarios(a, b, &chosen).unwrap().into_iter().map(|p| (p.a, p.b, p.by)).collect()
    }

    fn pair(a: &str, b: &str, by: PairedBy) -> (String, String, PairedBy) {
        (a.to_owned(), b.to_owned(), by)
    }

    #[test]
    fn differently_named_scenarios_pair_by_their_target() {
        let a = ran(&[("base", "http://a/"), ("tuned", "http://b/"), ("same", "http://c/")]);
        let b = ran(&[("old", "http://a/"), ("new", "http://b/"), ("same", "http://z/")]);
        assert_eq!(pairs(&a, &b, &[]), [pair("base", "old", PairedBy::Target), pair("tuned", "new", PairedBy::Target)]);
        let found = pair_scenarios(&a, &b, &[]).unwrap();
        assert_eq!(found[0].target.as_deref(), Some("http://a/"));
    }

    #[test]
    fn a_target_two_scenarios_share_pairs_with_none() {
        let a = ran(&[("left", "http://a/"), ("right", "http://a/")]);
        let b = ran(&[("one", "http://a/"), ("two", "http://b/")]);
        assert_eq!(pairs(&a, &b, &[]), []);
        // Chosen, they pair; the rest still pair by target where they can.
        assert_eq!(pairs(&a, &b, &[("left", "one")]), [pair("left", "one", PairedBy::Choice)]);
    }

    #[test]
    fn one_scenario_each_pairs_whatever_the_targets() {
        let (a, b) = (ran(&[("x", "http://a/")]), ran(&[("y", "http://b/")]));
        assert_eq!(pairs(&a, &b, &[]), [pair("x", "y", PairedBy::OneEach)]);
        // Without recorded targets (runs kept before they were), the same.
        let (a, b) = (Ran::of(&[passing("c", "x", 0)], None), Ran::of(&[passing("c", "y", 0)], None));
        assert_eq!(pairs(&a, &b, &[]), [pair("x", "y", PairedBy::OneEach)]);
        assert_eq!(pairs(&a, &a, &[]), []);
    }

    #[test]
    fn choices_name_scenarios_of_each_run_once() {
        let a = ran(&[("x", "http://a/"), ("y", "http://a/")]);
        let b = ran(&[("x", "http://a/"), ("z", "http://a/")]);
        let refused = |chosen: &[(&str, &str)]| {
            let chosen: Vec<(String, String)> =
                chosen.iter().map(|(x, y)| ((*x).to_owned(), (*y).to_owned())).collect();
            pair_scenarios(&a, &b, &chosen).unwrap_err().to_string()
        };
        assert_eq!(
            refused(&[("w", "z")]),
            "`--scenario w=z`: run A has no results of a scenario `w` (it has `x`, `y`)"
        );
        assert_eq!(
            refused(&[("y", "w")]),
            "`--scenario y=w`: run B has no results of a scenario `w` (it has `x`, `z`)"
        );
        assert_eq!(refused(&[("y", "z"), ("x", "z")]), "`--scenario x=z`: each scenario may be chosen once");
        assert_eq!(
            refused(&[("x", "z")]),
            "`--scenario x=z`: run B also has a scenario `x`, which would pair with A's by name; choose its pair too \
             (`--scenario OTHER=x`)"
        );
        assert_eq!(
            pairs(&a, &b, &[("x", "z"), ("y", "x")]),
            [pair("x", "z", PairedBy::Choice), pair("y", "x", PairedBy::Choice)]
        );
    }
}
