//! Typed parsing of the Prometheus envelope and matrix, borrowing from the body, without
//! going through `serde_json::Value`.

use std::borrow::Cow;
use std::fmt;

use evidence_result::series::SeriesFold;
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::bound::{BoundedStr, deserialize_str_with};
use crate::ConnectorError;

/// Label pairs as parsed, borrowing from the body where possible.
pub(crate) type Labels<'a> = Vec<(Cow<'a, str>, Cow<'a, str>)>;

/// The envelope's `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseStatus {
    /// `"success"`.
    Success,
    /// `"error"`.
    Error,
}

/// One series of a matrix: its labels as returned and its `(time, value)` points.
/// Values are parsed from Prometheus' strings; `NaN`, `+Inf` and `-Inf` become the
/// corresponding floats.
#[derive(Debug, Clone, PartialEq)]
pub struct Series<'a> {
    /// Label names and values in the order the provider wrote them.
    pub labels: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    /// `(Unix seconds, value)` in time order.
    pub points: Vec<(f64, f64)>,
}

/// A parsed Prometheus `query_range` answer: the envelope and, on success, the matrix.
/// Strings borrow from the body where they need no unescaping.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryRangeResponse<'a> {
    /// `success` or `error`.
    pub status: ResponseStatus,
    /// The matrix on success; empty on error or when no series matched.
    pub series: Vec<Series<'a>>,
    /// Prometheus' `errorType` (`bad_data`, `execution`, `timeout`, ...).
    pub error_type: Option<Cow<'a, str>>,
    /// Prometheus' complete `error` text.
    pub error: Option<Cow<'a, str>>,
    /// Prometheus' `warnings`, verbatim.
    pub warnings: Vec<Cow<'a, str>>,
}

impl<'a> QueryRangeResponse<'a> {
    /// Parses a body.
    ///
    /// Errors: [`ConnectorError::NotJson`] when the body is not JSON at all (an HTML
    /// page, a truncated body), [`ConnectorError::InvalidResponse`] when it is JSON but
    /// not a `query_range` answer (unknown status, a success without a matrix, a value
    /// that is not a number).
    pub fn parse(body: &'a [u8]) -> Result<Self, ConnectorError> {
        let parsed = parse_with::<Series<'a>>(body)?;
        Ok(QueryRangeResponse {
            status: parsed.status,
            series: parsed.series,
            error_type: parsed.error_type,
            error: parsed.error,
            warnings: parsed.warnings,
        })
    }
}

/// What the parser keeps of each series: all points ([`Series`]) or only a summary
/// ([`SeriesDigest`]), so compaction never holds every point of a large answer at once.
pub(crate) trait FromSeries<'a>: Sized {
    fn from_series(labels: Vec<(Cow<'a, str>, Cow<'a, str>)>, points: Vec<(f64, f64)>) -> Self;
}

impl<'a> FromSeries<'a> for Series<'a> {
    fn from_series(labels: Vec<(Cow<'a, str>, Cow<'a, str>)>, points: Vec<(f64, f64)>) -> Self {
        Series { labels, points }
    }
}

/// One series reduced to what compaction needs: its labels and the fold over its points
/// (counts and exact statistics).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SeriesDigest<'a> {
    pub(crate) labels: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    pub(crate) fold: SeriesFold,
}

impl<'a> FromSeries<'a> for SeriesDigest<'a> {
    fn from_series(labels: Vec<(Cow<'a, str>, Cow<'a, str>)>, points: Vec<(f64, f64)>) -> Self {
        SeriesDigest::of(labels, &points)
    }
}

impl<'a> SeriesDigest<'a> {
    pub(crate) fn of(labels: Vec<(Cow<'a, str>, Cow<'a, str>)>, points: &[(f64, f64)]) -> Self {
        let mut fold = SeriesFold::default();
        for &(t, v) in points {
            fold.push(t, v);
        }
        SeriesDigest { labels, fold }
    }
}

/// A parsed envelope whose series are kept as `S`.
pub(crate) struct Parsed<'a, S> {
    pub(crate) status: ResponseStatus,
    pub(crate) series: Vec<S>,
    pub(crate) error_type: Option<Cow<'a, str>>,
    pub(crate) error: Option<Cow<'a, str>>,
    pub(crate) warnings: Vec<Cow<'a, str>>,
}

/// Parses an envelope, keeping each series as `S`.
pub(crate) fn parse_with<'a, S: FromSeries<'a>>(
    body: &'a [u8],
) -> Result<Parsed<'a, S>, ConnectorError> {
    let envelope: Envelope<'a, S> = serde_json::from_slice(body).map_err(classify)?;
    let status = match &*envelope.status.0 {
        "success" => ResponseStatus::Success,
        "error" => ResponseStatus::Error,
        other => {
            return Err(ConnectorError::InvalidResponse(format!(
                "unknown status {other:?}"
            )));
        }
    };
    let series = match (status, envelope.data) {
        (ResponseStatus::Success, Some(data)) => {
            if data.result_type.0 != "matrix" {
                return Err(ConnectorError::InvalidResponse(format!(
                    "expected a matrix result, got {:?}",
                    data.result_type.0
                )));
            }
            data.result.into_iter().map(|s| s.0).collect()
        }
        (ResponseStatus::Success, None) => {
            return Err(ConnectorError::InvalidResponse(
                "a success without data".to_owned(),
            ));
        }
        (ResponseStatus::Error, _) => Vec::new(),
    };
    Ok(Parsed {
        status,
        series,
        error_type: envelope.error_type.map(|s| s.0),
        error: envelope.error.map(|s| s.0),
        warnings: envelope.warnings.into_iter().map(|s| s.0).collect(),
    })
}

/// The error the typed envelope parser finds in the start of a body before it runs out
/// of input, if any: what is wrong before the end of `start`.
pub(crate) fn error_before_end(start: &[u8]) -> Option<ConnectorError> {
    match serde_json::from_slice::<Envelope<'_, SeriesDigest<'_>>>(start) {
        Err(e) if !e.is_eof() => Some(classify(e)),
        _ => None,
    }
}

/// A JSON error as a connector error: not JSON at all (syntax, end of input) or JSON
/// that is not a `query_range` answer.
pub(crate) fn classify(e: serde_json::Error) -> ConnectorError {
    use serde_json::error::Category;
    match e.classify() {
        Category::Syntax | Category::Eof | Category::Io => ConnectorError::NotJson(e.to_string()),
        Category::Data => ConnectorError::InvalidResponse(e.to_string()),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(bound(deserialize = "'de: 'a, S: FromSeries<'a>"))]
struct Envelope<'a, S> {
    #[serde(borrow)]
    status: CowStr<'a>,
    #[serde(borrow, default = "Option::default")]
    data: Option<Data<'a, S>>,
    #[serde(borrow, default)]
    error_type: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    error: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    warnings: Vec<CowStr<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(bound(deserialize = "'de: 'a, S: FromSeries<'a>"))]
struct Data<'a, S> {
    #[serde(borrow)]
    result_type: CowStr<'a>,
    #[serde(borrow, default = "Vec::new")]
    result: Vec<RawSeries<'a, S>>,
}

/// One element of `result`: `{"metric": {...}, "values": [...]}` (other keys, such as
/// native `histograms`, are skipped), kept as `S`.
struct RawSeries<'a, S>(S, std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a, S: FromSeries<'a>> Deserialize<'de> for RawSeries<'a, S> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V<'a, S>(std::marker::PhantomData<(&'a (), S)>);
        impl<'de: 'a, 'a, S: FromSeries<'a>> Visitor<'de> for V<'a, S> {
            type Value = RawSeries<'a, S>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a series with metric and values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut labels = Vec::new();
                let mut points = Vec::new();
                while let Some(key) = map.next_key::<CowStr<'de>>()? {
                    match &*key.0 {
                        "metric" => labels = map.next_value::<LabelMap<'a>>()?.0,
                        "values" => points = map.next_value::<Points>()?.0,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(RawSeries(
                    S::from_series(labels, points),
                    std::marker::PhantomData,
                ))
            }
        }
        deserializer.deserialize_map(V(std::marker::PhantomData))
    }
}

/// One element of `result` read on its own by the streaming parser (`stream.rs`): its
/// points are folded as they are read, never collected. Reads exactly what
/// [`RawSeries`] reads (a later `metric` or `values` key replaces an earlier one; other
/// keys are skipped), so both paths fold the same points in the same order.
pub(crate) struct StreamedSeries<'a>(pub(crate) SeriesDigest<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for StreamedSeries<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = StreamedSeries<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a series with metric and values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut labels = Vec::new();
                let mut fold = SeriesFold::default();
                while let Some(key) = map.next_key::<CowStr<'de>>()? {
                    match &*key.0 {
                        "metric" => labels = map.next_value::<LabelMap<'a>>()?.0,
                        "values" => fold = map.next_value::<FoldedPoints>()?.0,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(StreamedSeries(SeriesDigest { labels, fold }))
            }
        }
        deserializer.deserialize_map(V(std::marker::PhantomData))
    }
}

/// The `values` array folded point by point into a [`SeriesFold`].
struct FoldedPoints(SeriesFold);

impl<'de> Deserialize<'de> for FoldedPoints {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = SeriesFold;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of [time, \"value\"] pairs")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut fold = SeriesFold::default();
                while let Some(Point(t, v)) = seq.next_element::<Point>()? {
                    fold.push(t, v);
                }
                Ok(fold)
            }
        }
        deserializer.deserialize_seq(V).map(FoldedPoints)
    }
}

impl SeriesDigest<'_> {
    /// The same digest owning its labels.
    pub(crate) fn into_owned(self) -> SeriesDigest<'static> {
        SeriesDigest {
            labels: self
                .labels
                .into_iter()
                .map(|(k, v)| (Cow::Owned(k.into_owned()), Cow::Owned(v.into_owned())))
                .collect(),
            fold: self.fold,
        }
    }
}

/// A string that borrows from the input when it holds no escapes.
struct CowStr<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for CowStr<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize_str_with(deserializer, whole).map(CowStr)
    }
}

/// A string kept whole.
fn whole(text: Cow<'_, str>) -> Cow<'_, str> {
    text
}

/// A label map kept as a list of pairs in input order (no sorting, no hashing), each
/// name and value bounded as it is read (`bound.rs`).
#[derive(Default)]
struct LabelMap<'a>(Labels<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for LabelMap<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Vec<(Cow<'de, str>, Cow<'de, str>)>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a label map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some((k, v)) = map.next_entry::<BoundedStr<'de>, BoundedStr<'de>>()? {
                    out.push((k.0, v.0));
                }
                Ok(out)
            }
        }
        deserializer.deserialize_map(V).map(LabelMap)
    }
}

/// The `values` array: `[[time, "value"], ...]` parsed straight into floats.
#[derive(Default)]
struct Points(Vec<(f64, f64)>);

impl<'de> Deserialize<'de> for Points {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Vec<(f64, f64)>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of [time, \"value\"] pairs")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(256));
                while let Some(Point(t, v)) = seq.next_element::<Point>()? {
                    out.push((t, v));
                }
                Ok(out)
            }
        }
        deserializer.deserialize_seq(V).map(Points)
    }
}

struct Point(f64, f64);

impl<'de> Deserialize<'de> for Point {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Point;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a [time, \"value\"] pair")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Point, A::Error> {
                let t: f64 = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let SampleValue(v) = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::invalid_length(1, &self))?;
                if seq.next_element::<IgnoredAny>()?.is_some() {
                    return Err(de::Error::invalid_length(3, &self));
                }
                Ok(Point(t, v))
            }
        }
        deserializer.deserialize_seq(V)
    }
}

/// A sample value: Prometheus writes it as a string (`"22.84"`, `"NaN"`, `"+Inf"`,
/// `"-Inf"`).
struct SampleValue(f64);

impl<'de> Deserialize<'de> for SampleValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = SampleValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a sample value string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<SampleValue, E> {
                parse_sample(v)
                    .map(SampleValue)
                    .ok_or_else(|| E::invalid_value(de::Unexpected::Str(v), &self))
            }
        }
        deserializer.deserialize_str(V)
    }
}

/// Parses a Prometheus sample value string.
pub(crate) fn parse_sample(s: &str) -> Option<f64> {
    match s {
        "NaN" => Some(f64::NAN),
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => {
            // Only plain decimal numbers; Rust would also accept words like "infinity".
            let plain = s
                .bytes()
                .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+' | b'e' | b'E'));
            if plain { s.parse().ok() } else { None }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_matrix_with_special_values_and_warnings() {
        let body = br#"{"status":"success","warnings":["w1"],"data":{"resultType":"matrix","result":[
            {"metric":{"__name__":"x","instance":"a:1","esc":"q\"uote"},"values":[[1.5,"1"],[2,"NaN"],[3,"+Inf"],[4,"-Inf"],[5,"2.25"]]},
            {"metric":{},"values":[]}]}}"#;
        let r = QueryRangeResponse::parse(body).unwrap();
        assert_eq!(r.status, ResponseStatus::Success);
        assert_eq!(r.warnings, vec![Cow::Borrowed("w1")]);
        assert_eq!(r.series.len(), 2);
        let s = &r.series[0];
        assert!(matches!(s.labels[1].1, Cow::Borrowed("a:1")));
        assert!(matches!(&s.labels[2].1, Cow::Owned(v) if v == "q\"uote"));
        assert_eq!(s.points[0], (1.5, 1.0));
        assert!(s.points[1].1.is_nan());
        assert_eq!(s.points[2].1, f64::INFINITY);
        assert_eq!(s.points[3].1, f64::NEG_INFINITY);
        assert_eq!(s.points[4], (5.0, 2.25));
        assert!(r.series[1].labels.is_empty());
    }

    #[test]
    fn parses_error_envelope() {
        let body = br#"{"status":"error","errorType":"bad_data","error":"1:10: parse error: missing unit character in duration"}"#;
        let r = QueryRangeResponse::parse(body).unwrap();
        assert_eq!(r.status, ResponseStatus::Error);
        assert_eq!(r.error_type.as_deref(), Some("bad_data"));
        assert!(r.error.unwrap().starts_with("1:10: parse error"));
    }

    #[test]
    fn classifies_bad_bodies() {
        for body in [&b"<html>oops</html>"[..], b"", b"{\"status\":\"succ"] {
            assert!(matches!(
                QueryRangeResponse::parse(body),
                Err(ConnectorError::NotJson(_))
            ));
        }
        for body in [
            &br#"{"status":"maybe"}"#[..],
            br#"{"status":"success"}"#,
            br#"{"status":"success","data":{"resultType":"vector","result":[]}}"#,
            br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"abc"]]}]}}"#,
            br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"infinity"]]}]}}"#,
            br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1",2]]}]}}"#,
            br#"[1,2]"#,
        ] {
            assert!(
                matches!(
                    QueryRangeResponse::parse(body),
                    Err(ConnectorError::InvalidResponse(_))
                ),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
