//! A discovery's answer from the fold over its query's series: the scope of every series
//! checked, the rows (names, values, label names or label sets) with their exact counts,
//! most series first, at most the policy's items, the prefix summary, and the whole
//! fitted under [`MAX_EVIDENCE_BYTES`] like a query's evidence.
//!
//! The query of a discovery names every scope label in its `by` clause (or keeps every
//! label, for `series` and `label_names`), so every series it returns states its scope.
//! The fold's common labels cover every series, listed or not: a scope label that is
//! not common with the policy's value means the provider answered for another scope (a
//! front that ignores the matcher), and the answer is refused whole.

use std::collections::{BTreeMap, BTreeSet};

use evidence_policy::lock::{DiscoveryAsk, DiscoveryForm};
use evidence_result::discovery::{
    Cell, Counted, DiscoveryFormat, DiscoveryKind, DiscoveryWindow, Metadata, MetadataSource,
    PrefixCount,
};
use evidence_result::{Discovery, evidence::EvidenceOutcome};

use super::census::{CensusSummary, MAX_CENSUS_VALUES};
use super::fit::MAX_EVIDENCE_BYTES;
use super::parse::Labels;
use super::sanitize::LabelSanitizer;
use super::summary::FoldSummary;
use crate::ConnectorError;

/// The most prefixes an answer lists; the others are summed in a last entry `other`.
pub const MAX_LISTED_PREFIXES: usize = 12;

fn kind(form: &DiscoveryForm) -> DiscoveryKind {
    match form {
        DiscoveryForm::MetricNames => DiscoveryKind::MetricNames,
        DiscoveryForm::LabelNames => DiscoveryKind::LabelNames,
        DiscoveryForm::LabelValues { .. } => DiscoveryKind::LabelValues,
        DiscoveryForm::Series => DiscoveryKind::Series,
        DiscoveryForm::MetricMetadata => DiscoveryKind::MetricMetadata,
    }
}

fn owned(labels: Labels<'_>) -> BTreeMap<String, String> {
    labels
        .into_iter()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// A count as a row cell: the exact series count of a row of a count query.
fn count(peak: Option<f64>) -> u64 {
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a count of series is a small non-negative integer"
    )]
    peak.map_or(0, |p| {
        if p.is_finite() && p > 0.0 {
            p.round() as u64
        } else {
            0
        }
    })
}

/// Refuses an answer holding a series outside the scope: every scope label must be
/// common to every series with the policy's value.
fn check_scope(ask: &DiscoveryAsk, common: &Labels<'_>) -> Result<(), ConnectorError> {
    for (label, value) in &ask.scope {
        let found = common
            .iter()
            .find(|(k, _)| k == label)
            .map(|(_, v)| v.as_ref());
        if found != Some(value.as_str()) {
            return Err(ConnectorError::OutOfScope(format!(
                "the answer holds series whose {label} is not this ticket's; the provider \
                 ignored the scope matcher, and nothing of its answer is used"
            )));
        }
    }
    Ok(())
}

/// The discovery answer of `ask` from its query's fold. `warnings` are the provider's
/// (bounded and redacted by the caller, as for evidence).
pub(crate) fn discovery(
    ask: &DiscoveryAsk,
    summary: FoldSummary<'_>,
    warnings: Vec<String>,
    sanitizer: &dyn LabelSanitizer,
) -> Result<Discovery, ConnectorError> {
    let kind = kind(&ask.form);
    let mut out = Discovery {
        format: DiscoveryFormat::DiscoveryV1,
        discover: kind,
        label: match &ask.form {
            DiscoveryForm::LabelValues { label } => Some(label.clone()),
            _ => None,
        },
        selector: ask.selector.clone(),
        window: DiscoveryWindow {
            start: ask.start.as_second(),
            end: ask.end.as_second(),
        },
        counted: Counted::SeriesWithSamplesInWindow,
        outcome: EvidenceOutcome::NoData,
        total: 0,
        more: 0,
        counts_capped_at: None,
        scope: BTreeMap::new(),
        prefixes: Vec::new(),
        columns: kind
            .columns()
            .map(|c| c.iter().map(|s| (*s).to_owned()).collect())
            .unwrap_or_default(),
        rows: Vec::new(),
        // Every listed name starts without metadata; `metadata::attach` fills it in.
        metadata: (kind == DiscoveryKind::MetricMetadata).then_some(Metadata {
            source: MetadataSource::ProviderGlobal,
            names: Vec::new(),
            without: 0,
        }),
        warnings,
    };
    if summary.series_count == 0 {
        return Ok(out);
    }
    check_scope(ask, &summary.common)?;
    out.outcome = EvidenceOutcome::Data;
    out.scope = ask.scope.iter().cloned().collect();
    let scope: BTreeSet<&str> = ask.scope.iter().map(|(l, _)| l.as_str()).collect();
    let census = summary.census.unwrap_or_default();
    let max = usize::try_from(ask.max_items).unwrap_or(usize::MAX);
    match &ask.form {
        DiscoveryForm::LabelNames => label_names(&mut out, census, max),
        DiscoveryForm::MetricNames
        | DiscoveryForm::MetricMetadata
        | DiscoveryForm::LabelValues { .. } => {
            let key = match &ask.form {
                DiscoveryForm::LabelValues { label } => label.as_str(),
                _ => "__name__",
            };
            out.total = summary.series_count;
            for s in summary.top {
                let n = count(s.fold.peak());
                let mut labels = owned(s.labels);
                sanitizer.sanitize(&mut labels)?;
                let text = labels.remove(key);
                out.rows.push(vec![Cell::Text(text), Cell::Count(n)]);
            }
            sort_rows(&mut out.rows);
            if ask.form.lists_names() {
                out.prefixes = prefixes(census.prefixes, census.untracked_names);
            }
        }
        DiscoveryForm::Series => {
            out.total = summary.series_count;
            let mut rows = Vec::with_capacity(summary.top.len());
            for s in summary.top {
                let mut labels = owned(s.labels);
                sanitizer.sanitize(&mut labels)?;
                labels.retain(|k, _| !scope.contains(k.as_str()));
                rows.push(labels);
            }
            let mut columns: Vec<String> = rows
                .iter()
                .flat_map(|r| r.keys().cloned())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            // The name first, as Prometheus prints a series.
            if let Some(at) = columns.iter().position(|c| c == "__name__") {
                let name = columns.remove(at);
                columns.insert(0, name);
            }
            out.rows = rows
                .into_iter()
                .map(|mut r| columns.iter().map(|c| Cell::Text(r.remove(c))).collect())
                .collect();
            out.columns = columns;
        }
    }
    out.more = out.total.saturating_sub(out.rows.len() as u64);
    if let Some(metadata) = &mut out.metadata {
        metadata.without = out.rows.len() as u64;
    }
    if out.more == 0 {
        // Every name is listed: the prefixes would say nothing more.
        out.prefixes.clear();
    }
    Ok(out)
}

/// Most series first, then by text, so equal answers read the same.
fn sort_rows(rows: &mut [Vec<Cell>]) {
    rows.sort_by(|a, b| {
        let n = |r: &Vec<Cell>| match r.get(1) {
            Some(Cell::Count(n)) => *n,
            _ => 0,
        };
        let t = |r: &Vec<Cell>| match r.first() {
            Some(Cell::Text(t)) => t.clone(),
            _ => None,
        };
        n(b).cmp(&n(a)).then_with(|| t(a).cmp(&t(b)))
    });
}

fn label_names(out: &mut Discovery, census: CensusSummary, max: usize) {
    out.total = census.labels.len() as u64 + census.untracked_labels;
    if census.capped {
        out.counts_capped_at = Some(MAX_CENSUS_VALUES);
    }
    if census.untracked_labels > 0 {
        out.warnings.push(format!(
            "{} label names beyond the first {} were counted, not listed",
            census.untracked_labels,
            census.labels.len()
        ));
    }
    out.rows = census
        .labels
        .into_iter()
        .take(max)
        .map(|(name, n)| vec![Cell::Text(Some(name)), Cell::Count(n)])
        .collect();
}

fn prefixes(all: Vec<(String, u64)>, untracked: u64) -> Vec<PrefixCount> {
    let mut listed: Vec<PrefixCount> = all
        .iter()
        .take(MAX_LISTED_PREFIXES)
        .map(|(prefix, names)| PrefixCount {
            prefix: prefix.clone(),
            names: *names,
        })
        .collect();
    let rest: u64 = all
        .iter()
        .skip(MAX_LISTED_PREFIXES)
        .map(|(_, n)| *n)
        .sum::<u64>()
        + untracked;
    if rest > 0 {
        listed.push(PrefixCount {
            prefix: "other".to_owned(),
            names: rest,
        });
    }
    listed
}

/// The length of `discovery`'s JSON.
fn json_len(discovery: &Discovery) -> usize {
    serde_json::to_vec(discovery).map_or(usize::MAX, |v| v.len())
}

/// Drops the last row (counted in `more`) and its metadata.
fn pop_row(discovery: &mut Discovery) -> bool {
    let Some(row) = discovery.rows.pop() else {
        return false;
    };
    discovery.more += 1;
    if let Some(metadata) = &mut discovery.metadata {
        let name = row.first().and_then(Cell::as_text);
        match metadata
            .names
            .iter()
            .position(|m| Some(m.name.as_str()) == name)
        {
            Some(at) => {
                metadata.names.remove(at);
            }
            None => metadata.without = metadata.without.saturating_sub(1),
        }
    }
    true
}

/// Fits a discovery under [`MAX_EVIDENCE_BYTES`]: rows go from the last (the fewest
/// series, with their metadata) and are counted in `more`, then prefixes from the last,
/// then warnings; a note says what went.
pub(crate) fn fit(discovery: &mut Discovery) {
    if json_len(discovery) <= MAX_EVIDENCE_BYTES {
        return;
    }
    let note_room = 160;
    let (mut rows, mut prefixes, mut warnings) = (0usize, 0usize, 0usize);
    while json_len(discovery) + note_room > MAX_EVIDENCE_BYTES {
        if discovery.rows.len() > 1 {
            pop_row(discovery);
            rows += 1;
        } else if !discovery.prefixes.is_empty() {
            discovery.prefixes.pop();
            prefixes += 1;
        } else if !discovery.warnings.is_empty() {
            discovery.warnings.pop();
            warnings += 1;
        } else if pop_row(discovery) {
            rows += 1;
        } else {
            break;
        }
    }
    let mut parts = Vec::new();
    if rows > 0 {
        parts.push(format!("{rows} rows (counted in more)"));
    }
    if prefixes > 0 {
        parts.push(format!("{prefixes} prefixes"));
    }
    if warnings > 0 {
        parts.push(format!("{warnings} provider warnings"));
    }
    discovery.warnings.push(format!(
        "the answer was cut to fit {MAX_EVIDENCE_BYTES} bytes: dropped {}",
        parts.join(", ")
    ));
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;
    use crate::prometheus::KeepLabels;
    use crate::prometheus::census::CensusKind;
    use crate::prometheus::parse::SeriesDigest;
    use crate::prometheus::summary::ResultFold;

    fn pairs(pairs: &[(&'static str, &'static str)]) -> Labels<'static> {
        pairs
            .iter()
            .map(|(k, v)| (Cow::Borrowed(*k), Cow::Borrowed(*v)))
            .collect()
    }

    fn ask(form: DiscoveryForm, max_items: u32) -> DiscoveryAsk {
        DiscoveryAsk {
            form,
            selector: "{cluster_id=\"SaaS01\"}".to_owned(),
            start: "2026-07-21T13:45:00Z".parse().unwrap(),
            end: "2026-07-21T14:50:00Z".parse().unwrap(),
            max_items,
            scope: vec![("cluster_id".to_owned(), "SaaS01".to_owned())],
        }
    }

    fn fold(
        rows: &[(&'static str, &'static str, f64)],
        census: Option<CensusKind>,
        top_k: u32,
    ) -> FoldSummary<'static> {
        let mut fold = ResultFold::new(top_k).with_census(census);
        for (name, cluster, n) in rows {
            fold.push(SeriesDigest::of(
                pairs(&[("__name__", name), ("cluster_id", cluster)]),
                &[(0.0, *n)],
            ));
        }
        fold.finish()
    }

    #[test]
    fn names_are_listed_most_series_first_with_how_many_more() {
        let rows = [
            ("tikv_a", "SaaS01", 12.0),
            ("tikv_b", "SaaS01", 56.0),
            ("tidb_a", "SaaS01", 56.0),
            ("up", "SaaS01", 1.0),
        ];
        let d = discovery(
            &ask(DiscoveryForm::MetricNames, 2),
            fold(&rows, Some(CensusKind::Prefixes), 2),
            Vec::new(),
            &KeepLabels,
        )
        .unwrap();
        d.check().unwrap();
        let json = serde_json::to_string(&d).unwrap();
        assert!(
            json.contains(r#""rows":[["tidb_a",56],["tikv_b",56]]"#),
            "{json}"
        );
        assert_eq!((d.total, d.more), (4, 2));
        assert_eq!(d.prefixes[0].prefix, "tikv_*");
        assert_eq!(d.prefixes[0].names, 2);
        assert_eq!(d.scope["cluster_id"], "SaaS01");
    }

    #[test]
    fn an_answer_for_another_scope_is_refused_whole() {
        let rows = [("tikv_a", "SaaS01", 12.0), ("tikv_a", "SaaS02", 3.0)];
        let err = discovery(
            &ask(DiscoveryForm::MetricNames, 10),
            fold(&rows, None, 10),
            Vec::new(),
            &KeepLabels,
        )
        .unwrap_err();
        assert!(matches!(err, ConnectorError::OutOfScope(_)));
        assert!(!err.to_string().contains("SaaS02"), "{err}");
        // Only one cluster, but the wrong one: refused as well.
        let rows = [("tikv_a", "SaaS02", 3.0)];
        assert!(
            discovery(
                &ask(DiscoveryForm::MetricNames, 10),
                fold(&rows, None, 10),
                Vec::new(),
                &KeepLabels,
            )
            .is_err()
        );
    }

    #[test]
    fn nothing_found_is_no_data() {
        let d = discovery(
            &ask(DiscoveryForm::Series, 10),
            fold(&[], None, 10),
            Vec::new(),
            &KeepLabels,
        )
        .unwrap();
        d.check().unwrap();
        assert_eq!(d.outcome, EvidenceOutcome::NoData);
    }

    #[test]
    fn a_long_answer_is_cut_to_its_bound_and_says_so() {
        let names: Vec<&'static str> = (0..400)
            .map(|i| &*Box::leak(format!("tikv_metric_with_a_long_name_{i:04}").into_boxed_str()))
            .collect();
        let rows: Vec<(&'static str, &'static str, f64)> =
            names.iter().map(|n| (*n, "SaaS01", 3.0)).collect();
        let mut d = discovery(
            &ask(DiscoveryForm::MetricNames, 500),
            fold(&rows, Some(CensusKind::Prefixes), 500),
            Vec::new(),
            &KeepLabels,
        )
        .unwrap();
        assert_eq!(d.rows.len(), 400);
        fit(&mut d);
        d.check().unwrap();
        assert!(json_len(&d) <= MAX_EVIDENCE_BYTES);
        assert_eq!(d.total, 400);
        assert_eq!(d.rows.len() as u64 + d.more, 400);
        assert!(d.warnings.last().unwrap().contains("cut to fit"));
    }
}
