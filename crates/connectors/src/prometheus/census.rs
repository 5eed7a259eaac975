//! The census a discovery needs besides the top rows of a fold: for `label_names`, every
//! label name of every series with its number of distinct values; for `metric_names`,
//! every metric name's prefix with its number of names. It observes each series as the
//! fold takes it and holds hashes and counts only, within fixed bounds, so its memory
//! stays flat however many series or values the provider sends.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};

use super::parse::Labels;

/// The most label names a label-names census tracks; further names are counted.
pub const MAX_CENSUS_LABELS: usize = 256;

/// The most distinct values counted per label name; a label with more is reported at
/// this number, marked as "at least".
pub const MAX_CENSUS_VALUES: u64 = 4_096;

/// The most prefixes a metric-names census tracks; names of further prefixes are
/// counted under none.
pub const MAX_CENSUS_PREFIXES: usize = 512;

/// What a census counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CensusKind {
    /// Label names and their distinct values.
    LabelNames,
    /// Metric name prefixes (the part before the first `_`) and their names.
    Prefixes,
}

/// The running census of one answer.
#[derive(Debug)]
pub(crate) struct Census {
    kind: CensusKind,
    labels: BTreeMap<String, HashSet<u64>>,
    capped: BTreeSet<String>,
    untracked_labels: u64,
    prefixes: BTreeMap<String, u64>,
    untracked_names: u64,
}

/// What a census found.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct CensusSummary {
    /// Label name and its distinct values (at most [`MAX_CENSUS_VALUES`]).
    pub(crate) labels: Vec<(String, u64)>,
    /// True when some label's count stopped at [`MAX_CENSUS_VALUES`].
    pub(crate) capped: bool,
    /// Label names seen beyond [`MAX_CENSUS_LABELS`].
    pub(crate) untracked_labels: u64,
    /// Prefix (`tikv_*`) and its names, most names first.
    pub(crate) prefixes: Vec<(String, u64)>,
    /// Names whose prefix was beyond [`MAX_CENSUS_PREFIXES`].
    pub(crate) untracked_names: u64,
}

fn hash(value: &str) -> u64 {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

/// The prefix of a metric name, as shown: `tikv_*`, or the whole name when it has no `_`
/// after its first character.
pub(crate) fn prefix_of(name: &str) -> String {
    match name.get(1..).and_then(|rest| rest.find('_')) {
        Some(at) => format!("{}_*", &name[..=at]),
        None => name.to_owned(),
    }
}

impl Census {
    pub(crate) fn new(kind: CensusKind) -> Self {
        Census {
            kind,
            labels: BTreeMap::new(),
            capped: BTreeSet::new(),
            untracked_labels: 0,
            prefixes: BTreeMap::new(),
            untracked_names: 0,
        }
    }

    /// Observes the labels of one series.
    pub(crate) fn observe(&mut self, labels: &Labels<'_>) {
        match self.kind {
            CensusKind::LabelNames => {
                for (name, value) in labels {
                    self.observe_label(name, value);
                }
            }
            CensusKind::Prefixes => {
                if let Some((_, name)) = labels.iter().find(|(k, _)| k == "__name__") {
                    let prefix = prefix_of(name);
                    if let Some(n) = self.prefixes.get_mut(&prefix) {
                        *n += 1;
                    } else if self.prefixes.len() < MAX_CENSUS_PREFIXES {
                        self.prefixes.insert(prefix, 1);
                    } else {
                        self.untracked_names += 1;
                    }
                }
            }
        }
    }

    fn observe_label(&mut self, name: &str, value: &str) {
        if self.capped.contains(name) {
            return;
        }
        let values = if self.labels.contains_key(name) {
            self.labels.get_mut(name)
        } else if self.labels.len() < MAX_CENSUS_LABELS {
            Some(self.labels.entry(name.to_owned()).or_default())
        } else {
            self.untracked_labels += 1;
            None
        };
        let Some(values) = values else {
            return;
        };
        values.insert(hash(value));
        if values.len() as u64 >= MAX_CENSUS_VALUES {
            // Only the count matters from here on: the hashes go.
            *values = HashSet::new();
            self.capped.insert(name.to_owned());
        }
    }

    /// The census once every series was observed.
    pub(crate) fn finish(self) -> CensusSummary {
        let capped = !self.capped.is_empty();
        let mut labels: Vec<(String, u64)> = self
            .labels
            .into_iter()
            .map(|(name, values)| {
                let n = if self.capped.contains(&name) {
                    MAX_CENSUS_VALUES
                } else {
                    values.len() as u64
                };
                (name, n)
            })
            .collect();
        labels.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let mut prefixes: Vec<(String, u64)> = self.prefixes.into_iter().collect();
        prefixes.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        CensusSummary {
            labels,
            capped,
            untracked_labels: self.untracked_labels,
            prefixes,
            untracked_names: self.untracked_names,
        }
    }

    /// The bytes of names the census holds and the hashes it keeps (for the tests of
    /// its bound).
    #[cfg(test)]
    pub(crate) fn held(&self) -> (usize, usize) {
        let names = self.labels.keys().map(String::len).sum::<usize>()
            + self.prefixes.keys().map(String::len).sum::<usize>();
        let hashes = self.labels.values().map(HashSet::len).sum();
        (names, hashes)
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;

    fn labels(pairs: &[(&str, String)]) -> Labels<'static> {
        pairs
            .iter()
            .map(|(k, v)| (Cow::Owned((*k).to_owned()), Cow::Owned(v.clone())))
            .collect()
    }

    #[test]
    fn label_names_count_distinct_values_within_their_bound() {
        let mut census = Census::new(CensusKind::LabelNames);
        for i in 0..100_000u64 {
            census.observe(&labels(&[
                ("__name__", format!("m{}", i % 3)),
                ("instance", format!("10.0.{}.{}:9100", i / 256, i % 256)),
                ("job", "tikv".to_owned()),
            ]));
            let (names, hashes) = census.held();
            assert!(names < 64 && hashes <= 3 * MAX_CENSUS_VALUES as usize);
        }
        let s = census.finish();
        assert_eq!(
            s.labels,
            vec![
                ("instance".to_owned(), MAX_CENSUS_VALUES),
                ("__name__".to_owned(), 3),
                ("job".to_owned(), 1)
            ]
        );
        assert!(s.capped);
        assert_eq!(s.untracked_labels, 0);
    }

    #[test]
    fn label_names_beyond_the_bound_are_counted() {
        let mut census = Census::new(CensusKind::LabelNames);
        for i in 0..(MAX_CENSUS_LABELS + 10) {
            census.observe(&labels(&[(&format!("l{i:04}"), "v".to_owned())]));
        }
        let s = census.finish();
        assert_eq!(s.labels.len(), MAX_CENSUS_LABELS);
        assert_eq!(s.untracked_labels, 10);
    }

    #[test]
    fn prefixes_group_names_by_their_first_part() {
        assert_eq!(prefix_of("tikv_engine_size_bytes"), "tikv_*");
        assert_eq!(prefix_of("up"), "up");
        assert_eq!(prefix_of("_x_y"), "_x_*");
        assert_eq!(prefix_of("a_"), "a_*");
        let mut census = Census::new(CensusKind::Prefixes);
        for name in ["tikv_a", "tikv_b", "tidb_a", "up", "tikv_c"] {
            census.observe(&labels(&[
                ("__name__", name.to_owned()),
                ("cluster_id", "c".to_owned()),
            ]));
        }
        let s = census.finish();
        assert_eq!(
            s.prefixes,
            vec![
                ("tikv_*".to_owned(), 3),
                ("tidb_*".to_owned(), 1),
                ("up".to_owned(), 1)
            ]
        );
    }
}
