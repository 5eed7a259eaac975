//! The series table: how the kept series of compact evidence are written, one row per
//! series under named columns, so no key and no constant value repeats per series.
//!
//! A table names its label columns (`labels`: the labels that are not common to every
//! returned series) and its statistic columns (`stats`), gives the point count once
//! (`points`) when every kept series has the same, and then one row per kept series,
//! highest peak first: the label values (`null` where a series lacks the label), then
//! the statistics (`null` for a series without any finite value). The peak's time is
//! `peak_after_start_s`, seconds after the window's start, when the evidence has a
//! window (`peak_time`, Unix seconds, otherwise). A `points` column
//! appears only when kept series differ in point count, a `non_finite` column only when
//! a kept series has non-finite points.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{figure::Figure, series::SeriesStats, series::SeriesSummary};

/// A statistic column of the series table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum StatColumn {
    /// Points of the series, finite or not (only when kept series differ).
    Points,
    /// `NaN`/`Inf` points of the series (only when a kept series has some).
    NonFinite,
    /// Smallest finite value.
    Min,
    /// Mean of the finite values.
    Mean,
    /// Last finite value.
    Last,
    /// Largest finite value (the earliest on ties).
    Peak,
    /// Time of the peak, whole Unix seconds (evidence without a window).
    PeakTime,
    /// Time of the peak, whole seconds after the window's start (evidence with a
    /// window): the peak is at `window.start + peak_after_start_s`.
    PeakAfterStartS,
}

/// One cell of a row: a label value, a count, a time, a figure, or `null`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum Cell {
    /// A missing label or a statistic of a series without finite values.
    Null(()),
    /// A label value.
    Text(String),
    /// A count or a non-negative integral figure.
    Count(u64),
    /// A time or a negative integral figure.
    Integer(i64),
    /// A figure with a fractional part.
    Number(Figure),
}

/// The kept series as a table, highest peak first. `labels` names the label columns
/// (the labels not common to every returned series), `stats` the statistic columns; each
/// row holds the label values (`null` where a series lacks the label), then the
/// statistics (`null` for a series without any finite value). `points` is stated once
/// when every kept series has the same point count, else it is a column; a `non_finite`
/// column appears only when a kept series has `NaN`/`Inf` points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SeriesTable {
    /// Names of the label columns: labels that are not common to every returned series.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    labels: Vec<String>,
    /// Names of the statistic columns, after the label columns.
    stats: Vec<StatColumn>,
    /// Points of every kept series, when they all have the same count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    points: Option<u64>,
    /// One row per kept series, highest peak first: label values, then statistics.
    rows: Vec<Vec<Cell>>,
}

const STATS: [StatColumn; 4] = [
    StatColumn::Min,
    StatColumn::Mean,
    StatColumn::Last,
    StatColumn::Peak,
];

/// The column of the peak's time: seconds after the window's start when the evidence
/// has a window (a few digits instead of ten), otherwise Unix seconds.
fn time_column(start: Option<i64>) -> StatColumn {
    match start {
        Some(_) => StatColumn::PeakAfterStartS,
        None => StatColumn::PeakTime,
    }
}

/// The statistic columns for a table with or without a `points` and a `non_finite`
/// column, of evidence with a window starting at `start` or without one.
fn stat_columns(points: bool, non_finite: bool, start: Option<i64>) -> Vec<StatColumn> {
    let mut columns = Vec::with_capacity(STATS.len() + 3);
    if points {
        columns.push(StatColumn::Points);
    }
    if non_finite {
        columns.push(StatColumn::NonFinite);
    }
    columns.extend(STATS);
    columns.push(time_column(start));
    columns
}

impl SeriesTable {
    /// The table of `series` without the `common` labels; `None` when nothing is kept.
    /// `start` is the window's start, when the evidence has one.
    pub(crate) fn of(
        series: &[SeriesSummary],
        common: &BTreeMap<String, String>,
        start: Option<i64>,
    ) -> Option<SeriesTable> {
        let first = series.first()?;
        let mut names: Vec<&String> = series
            .iter()
            .flat_map(|s| s.labels.keys())
            .filter(|k| !common.contains_key(*k))
            .collect();
        names.sort();
        names.dedup();
        let uniform = series.iter().all(|s| s.points == first.points);
        let non_finite = series.iter().any(|s| s.non_finite_points > 0);
        let rows = series
            .iter()
            .map(|s| {
                let mut row: Vec<Cell> = names
                    .iter()
                    .map(|k| {
                        s.labels
                            .get(*k)
                            .map_or(Cell::Null(()), |v| Cell::Text(v.clone()))
                    })
                    .collect();
                if !uniform {
                    row.push(Cell::Count(s.points));
                }
                if non_finite {
                    row.push(Cell::Count(s.non_finite_points));
                }
                match &s.stats {
                    Some(st) => row.extend([
                        Cell::Number(st.min),
                        Cell::Number(st.mean),
                        Cell::Number(st.last),
                        Cell::Number(st.peak),
                        time_cell(st.peak_time.saturating_sub(start.unwrap_or(0))),
                    ]),
                    None => row.extend([(); STATS.len() + 1].map(|()| Cell::Null(()))),
                }
                row
            })
            .collect();
        Some(SeriesTable {
            labels: names.into_iter().cloned().collect(),
            stats: stat_columns(!uniform, non_finite, start),
            points: uniform.then_some(first.points),
            rows,
        })
    }

    /// The kept series back, each with the `common` labels added. `start` is the
    /// window's start, when the evidence has one.
    pub(crate) fn into_series(
        self,
        common: &BTreeMap<String, String>,
        start: Option<i64>,
    ) -> Result<Vec<SeriesSummary>, String> {
        let has_points = self.stats.first() == Some(&StatColumn::Points);
        let has_non_finite = self.stats.contains(&StatColumn::NonFinite);
        let expected = stat_columns(has_points, has_non_finite, start);
        if self.stats != expected {
            return Err(format!("series stats must be {expected:?}"));
        }
        if has_points == self.points.is_some() {
            return Err("series points must be given once or as a column".to_owned());
        }
        if let Some(name) = self.labels.iter().find(|n| common.contains_key(*n)) {
            return Err(format!("label {name:?} is both common and a column"));
        }
        let width = self.labels.len() + self.stats.len();
        self.rows
            .into_iter()
            .map(|row| {
                if row.len() != width {
                    return Err(format!("a series row must have {width} cells"));
                }
                let mut cells = row.into_iter();
                let mut labels = common.clone();
                for name in &self.labels {
                    match cells.next() {
                        Some(Cell::Text(v)) => {
                            labels.insert(name.clone(), v);
                        }
                        Some(Cell::Null(())) => {}
                        _ => return Err(format!("label {name:?} must be a string or null")),
                    }
                }
                let points = match self.points {
                    Some(n) => n,
                    None => count(cells.next(), "points")?,
                };
                let non_finite_points = if has_non_finite {
                    count(cells.next(), "non_finite")?
                } else {
                    0
                };
                let rest: Vec<Cell> = cells.collect();
                let stats = if rest.iter().all(|c| *c == Cell::Null(())) {
                    None
                } else {
                    let [min, mean, last, peak, time] = <[Cell; 5]>::try_from(rest)
                        .map_err(|_| "a series row must end in five statistics".to_owned())?;
                    Some(SeriesStats {
                        min: number(min)?,
                        mean: number(mean)?,
                        last: number(last)?,
                        peak: number(peak)?,
                        peak_time: match time {
                            Cell::Count(t) => {
                                i64::try_from(t).map_err(|_| "the peak's time out of range")?
                            }
                            Cell::Integer(t) => t,
                            _ => return Err("the peak's time must be whole seconds".to_owned()),
                        }
                        .checked_add(start.unwrap_or(0))
                        .ok_or("the peak's time out of range")?,
                    })
                };
                Ok(SeriesSummary {
                    labels,
                    points,
                    non_finite_points,
                    stats,
                })
            })
            .collect()
    }
}

/// A time cell: a count when not negative.
fn time_cell(t: i64) -> Cell {
    match u64::try_from(t) {
        Ok(t) => Cell::Count(t),
        Err(_) => Cell::Integer(t),
    }
}

fn count(cell: Option<Cell>, name: &str) -> Result<u64, String> {
    match cell {
        Some(Cell::Count(n)) => Ok(n),
        _ => Err(format!("{name} must be a count")),
    }
}

fn number(cell: Cell) -> Result<Figure, String> {
    #[expect(
        clippy::cast_precision_loss,
        reason = "integral figures are written exactly below 2^53"
    )]
    let value = match cell {
        Cell::Count(n) => n as f64,
        Cell::Integer(n) => n as f64,
        Cell::Number(f) => f.get(),
        _ => return Err("a statistic must be a number".to_owned()),
    };
    Figure::new(value).ok_or_else(|| "a statistic must be finite".to_owned())
}
