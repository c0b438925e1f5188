//! `--shard K/N`: the selected scenarios cut into N parts of about the same wall time, the same
//! cut on every machine, so that N jobs of a CI matrix each run one and `merge` puts their
//! reports together. Pure.
//!
//! Greedy, longest first: the scenarios by weight (longest first, ties by id), each into the
//! part with the least weight so far (ties: the fewest scenarios, then the lowest K). Every
//! scenario lands in exactly one part, and the same ids and weights give the same parts.
//!
//! A scenario's weight ([`weights`]) is what it says it waits ([`super::expected_duration`]) plus
//! a [`BASE`] cost or, when given (`--shard-durations FILE`), what it took in an earlier run,
//! whichever is more. Not the
//! durations the runner keeps in its cache ([`super::durations`]): they differ from machine to
//! machine and change as soon as one shard finishes, and shards that weigh differently would
//! run some scenarios twice and others never.

use std::collections::BTreeMap;
use std::time::Duration;

use super::durations::Durations;
use crate::scenario::Scenario;

/// Part `k` (from 1) of `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub k: usize,
    pub n: usize,
}

/// A `--shard` value that is not `K/N` with 1 ≤ K ≤ N.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    #[error("{0:?} is not K/N (e.g. 2/3: the second of three parts)")]
    Syntax(String),
    #[error("{k}/{n}: K must be from 1 to N")]
    OutOfRange { k: usize, n: usize },
}

impl Shard {
    /// `K/N`, 1 ≤ K ≤ N.
    pub fn parse(s: &str) -> Result<Shard, ShardError> {
        let syntax = || ShardError::Syntax(s.to_owned());
        let (k, n) = s.split_once('/').ok_or_else(syntax)?;
        let k: usize = k.trim().parse().map_err(|_| syntax())?;
        let n: usize = n.trim().parse().map_err(|_| syntax())?;
        if k == 0 || n == 0 || k > n {
            return Err(ShardError::OutOfRange { k, n });
        }
        Ok(Shard { k, n })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.k, self.n)
    }
}

/// What a scenario costs besides what it waits (a process started, a handshake, teardown), for
/// the weight of one whose duration in an earlier run is not known.
pub const BASE: Duration = Duration::from_millis(100);

/// The weight of each scenario: what it waits plus [`BASE`], or what it took in `earlier` when
/// that is more.
pub fn weights<'a>(scenarios: impl IntoIterator<Item = &'a Scenario>, earlier: &Durations) -> Vec<(&'a str, Duration)> {
    scenarios
        .into_iter()
        .map(|s| (s.id.as_str(), (super::expected_duration(s) + BASE).max(earlier.get(&s.id).unwrap_or_default())))
        .collect()
}

/// The part (from 1 to `n`) of each item (id, weight), in the order given.
pub fn assign(items: &[(&str, Duration)], n: usize) -> Vec<usize> {
    let n = n.max(1);
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|&a, &b| items[b].1.cmp(&items[a].1).then_with(|| items[a].0.cmp(items[b].0)));
    let mut load = vec![(Duration::ZERO, 0usize); n];
    let mut part = vec![0; items.len()];
    for i in order {
        let k = (0..n).min_by_key(|&k| (load[k], k)).expect("n ≥ 1");
        load[k].0 += items[i].1;
        load[k].1 += 1;
        part[i] = k + 1;
    }
    part
}

/// Durations of an earlier run for the weights: a JSON report (`duration_ms` of each case), or
/// a table of `id<TAB>milliseconds` lines as the runner keeps them.
pub fn durations_of(text: &str, path: &std::path::Path) -> Result<Durations, super::json_report::ReportError> {
    if !text.trim_start().starts_with('{') {
        return Ok(Durations::parse(text));
    }
    let report = super::json_report::read(text, path)?;
    let table: BTreeMap<String, Duration> = report.cases().map(|(_, r)| (r.id.clone(), r.duration)).collect();
    Ok(Durations(table))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn k_of_n_is_parsed_and_checked() {
        assert_eq!(Shard::parse("2/3"), Ok(Shard { k: 2, n: 3 }));
        assert_eq!(Shard::parse("1/1"), Ok(Shard { k: 1, n: 1 }));
        assert_eq!(Shard::parse("0/3"), Err(ShardError::OutOfRange { k: 0, n: 3 }));
        assert_eq!(Shard::parse("4/3"), Err(ShardError::OutOfRange { k: 4, n: 3 }));
        assert_eq!(Shard::parse("1/0"), Err(ShardError::OutOfRange { k: 1, n: 0 }));
        assert!(matches!(Shard::parse("2"), Err(ShardError::Syntax(_))));
        assert!(matches!(Shard::parse("a/3"), Err(ShardError::Syntax(_))));
        assert_eq!(Shard::parse("4/3").unwrap_err().to_string(), "4/3: K must be from 1 to N");
    }

    #[test]
    fn every_item_lands_in_one_part_the_same_way_every_time_and_the_parts_balance() {
        // 40 scenarios: a few long ones (waits), most short, several alike.
        let names: Vec<String> = (0..40).map(|i| format!("s{i:02}")).collect();
        let items: Vec<(&str, Duration)> = names
            .iter()
            .enumerate()
            .map(|(i, id)| {
                (
                    id.as_str(),
                    ms(match i % 10 {
                        0 => 5000,
                        1 => 1200,
                        _ => 20 + (i as u64 % 3),
                    }),
                )
            })
            .collect();
        for n in 1..=7 {
            let parts = assign(&items, n);
            assert!(parts.iter().all(|&k| (1..=n).contains(&k)));
            assert_eq!(parts, assign(&items, n), "deterministic");
            // The same items in another order: the same part for each id.
            let mut reversed = items.clone();
            reversed.reverse();
            let mut again = assign(&reversed, n);
            again.reverse();
            assert_eq!(parts, again, "independent of the given order");
            let mut load = vec![Duration::ZERO; n];
            for (i, &k) in parts.iter().enumerate() {
                load[k - 1] += items[i].1;
            }
            let (lo, hi) = (load.iter().min().unwrap(), load.iter().max().unwrap());
            let longest = items.iter().map(|i| i.1).max().unwrap();
            assert!(*hi - *lo <= longest, "{n}: {load:?}");
        }
        // Nothing known of any: spread by count.
        let zero: Vec<(&str, Duration)> = names.iter().map(|id| (id.as_str(), Duration::ZERO)).collect();
        let parts = assign(&zero, 3);
        let counts: Vec<usize> = (1..=3).map(|k| parts.iter().filter(|&&p| p == k).count()).collect();
        assert_eq!(counts, [14, 13, 13]);
    }

    #[test]
    fn durations_come_from_a_report_or_a_table() {
        let p = std::path::Path::new("d");
        let t = durations_of("calls.echo\t16\n", p).unwrap();
        assert_eq!(t.get("calls.echo"), Some(ms(16)));
        let r = "{\"target\": \"t\", \"cases\": [{\"id\": \"a\", \"level\": \"MUST\", \"verdict\": \"PASS\", \"duration_ms\": 700}]}";
        assert_eq!(durations_of(r, p).unwrap().get("a"), Some(ms(700)));
        assert!(durations_of("{", p).is_err());
    }
}
