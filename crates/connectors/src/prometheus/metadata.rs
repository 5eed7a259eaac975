//! The provider's metadata (type, unit, help) of the names a `metric_metadata` discovery
//! listed. Prometheus' `/api/v1/metadata` takes no matcher and no range: what it says
//! is global to the provider. So it is asked one listed name at a time (`metric=<name>`,
//! names the scoped query found, never a name the model wrote), each answer read whole
//! under a small bound, its text redacted and cut to bounds, and put beside the rows
//! marked `provider_global`. Prometheus keys the metadata of a histogram, a summary
//! and an OpenMetrics counter or info by the family name, which its series extend
//! (`x_bucket`, `x_count`, `x_sum`, `x_total`, `x_created`, `x_info`): when a listed
//! name has no entry and ends in such a suffix, the family name is asked next. A name
//! the provider has no metadata for, or whose request failed, counts in `without`;
//! failures are summed in one warning and never fail the discovery, whose rows stand on
//! their own.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use evidence_result::Discovery;
use evidence_result::discovery::{Cell, DiscoveryKind, NameMetadata};
use futures::StreamExt as _;
use serde::Deserialize;
use url::Url;

use super::answer::Answer;
use super::bound::bounded_to;
use super::discover;
use super::fetch::{RawResponse, ResponseLimits, fetch};
use super::mapping::ResponseMapper;
use crate::ConnectorError;
use crate::deadline::Deadline;

/// The most bytes of one metadata answer read (one name's entries).
pub const METADATA_BODY_BYTES: usize = 64 * 1024;

/// The most characters of a help text kept; a longer one is cut and marked.
pub const MAX_HELP_CHARS: usize = 160;

/// The most characters of a type or unit kept.
pub const MAX_WORD_CHARS: usize = 32;

/// How many metadata requests of one discovery run at once.
pub const METADATA_CONCURRENCY: usize = 4;

/// The metadata URL beside a `query_range` URL: the same Prometheus API root, so the
/// same host, scope path and credentials. `None` when the URL does not end in
/// `/query_range` (then no metadata is asked).
pub(crate) fn metadata_url(query_url: &Url) -> Option<Url> {
    let root = query_url.path().strip_suffix("/query_range")?;
    let mut url = query_url.clone();
    url.set_path(&format!("{root}/metadata"));
    url.set_query(None);
    Some(url)
}

/// One metadata request over HTTP: `request` (a `GET` of a URL [`complete_metadata`]
/// gave, with the call's credentials) read whole under [`METADATA_BODY_BYTES`] within
/// `timeout`.
pub(crate) async fn fetch_http(
    request: reqwest::RequestBuilder,
    timeout: Duration,
) -> Result<RawResponse, ConnectorError> {
    let limits = ResponseLimits {
        max_body_bytes: METADATA_BODY_BYTES,
        timeout,
    };
    fetch(request, &limits).await
}

/// The metadata URL of `name`: `at` with `metric=<name>`.
fn url_of(at: &Url, name: &str) -> Url {
    let mut url = at.clone();
    url.query_pairs_mut().append_pair("metric", name);
    url
}

/// The names whose metadata `answer` needs: the listed rows of a `metric_metadata`
/// answer, in row order (none for any other answer).
pub(crate) fn names_to_ask(answer: &Answer) -> Vec<String> {
    match answer {
        Answer::Discovery(d) if d.discover == DiscoveryKind::MetricMetadata => d
            .rows
            .iter()
            .filter_map(|r| r.first().and_then(Cell::as_text).map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

/// The suffixes by which a series name extends its metric family's name.
const FAMILY_SUFFIXES: [&str; 6] = ["_bucket", "_count", "_sum", "_total", "_created", "_info"];

/// The family name `name` extends, when it ends in one of [`FAMILY_SUFFIXES`].
fn family_of(name: &str) -> Option<&str> {
    FAMILY_SUFFIXES
        .iter()
        .find_map(|suffix| name.strip_suffix(suffix))
        .filter(|family| !family.is_empty())
}

/// `answer` with the metadata of its listed names: `fetch` gets each name's URL, the
/// metadata URL `at` (from [`metadata_url`]) with `metric=<name>`, at most
/// [`METADATA_CONCURRENCY`] names at once, all within `deadline`, and a name's family
/// name after it when it has none. With no `at` nothing is sent and the warning says
/// so. Any other answer comes back as it is, nothing fetched.
pub(crate) async fn complete_metadata<F, Fut>(
    answer: Answer,
    mapper: &ResponseMapper,
    deadline: &Deadline,
    at: Option<&Url>,
    fetch: F,
) -> Answer
where
    F: Fn(Url) -> Fut,
    Fut: Future<Output = Result<RawResponse, ConnectorError>>,
{
    let names = names_to_ask(&answer);
    let Answer::Discovery(mut discovery) = answer else {
        return answer;
    };
    if names.is_empty() {
        return Answer::Discovery(discovery);
    }
    let Some(at) = at else {
        let why = "the query path does not end in /query_range, so it names no metadata path";
        let fetched = names
            .into_iter()
            .map(|n| (n, Err(why.to_owned())))
            .collect();
        attach(&mut discovery, fetched, mapper);
        return Answer::Discovery(discovery);
    };
    let fetch = &fetch;
    let pending: Vec<_> = names
        .into_iter()
        .map(|name| async move {
            let mut found = read(&name, fetch(url_of(at, &name)).await);
            if let (Ok(None), Some(family)) = (&found, family_of(&name)) {
                found = read(family, fetch(url_of(at, family)).await);
            }
            (name, found)
        })
        .collect();
    let all = futures::stream::iter(pending)
        .buffered(METADATA_CONCURRENCY)
        .collect::<Vec<_>>();
    match deadline.run(all).await {
        Ok(fetched) => attach(&mut discovery, fetched, mapper),
        Err(_) => discovery.warnings.push(
            "metadata was not read: the call's time ran out after the names were counted"
                .to_owned(),
        ),
    }
    Answer::Discovery(discovery)
}

/// One entry of a metadata answer.
#[derive(Debug, Deserialize)]
struct Entry {
    #[serde(rename = "type", default)]
    metric_type: Option<String>,
    #[serde(default)]
    unit: Option<String>,
    #[serde(default)]
    help: Option<String>,
}

/// A metadata answer: `{"status": "success", "data": {"<name>": [entries]}}`.
#[derive(Debug, Deserialize)]
struct Envelope {
    status: String,
    #[serde(default)]
    data: Option<HashMap<String, Vec<Entry>>>,
    #[serde(default)]
    error: Option<String>,
}

/// What one name's answer says: its first entry, none, or why it could not be read.
fn read(name: &str, fetched: Result<RawResponse, ConnectorError>) -> Result<Option<Entry>, String> {
    let raw = match fetched {
        Ok(raw) => raw,
        Err(ConnectorError::BodyTooLarge { limit }) => {
            return Err(format!("an answer over {limit} bytes"));
        }
        Err(ConnectorError::Timeout(_)) => return Err("no answer in time".to_owned()),
        Err(e) => return Err(format!("no answer ({e})")),
    };
    if !raw.is_success() {
        return Err(format!("HTTP {}", raw.status));
    }
    let envelope: Envelope = serde_json::from_slice(&raw.body)
        .map_err(|_| "an answer that is not a Prometheus metadata answer".to_owned())?;
    if envelope.status != "success" {
        return Err(format!(
            "an error answer: {}",
            envelope.error.unwrap_or_default()
        ));
    }
    // Only the entry of the name asked: an answer for other names says nothing of it.
    Ok(envelope
        .data
        .and_then(|mut data| data.remove(name))
        .and_then(|entries| entries.into_iter().next()))
}

/// A provider text for the answer: redacted, bounded to `max` characters, and non-empty.
fn text(mapper: &ResponseMapper, value: Option<String>, max: usize) -> Option<String> {
    let value = value.filter(|v| !v.trim().is_empty())?;
    let redacted = mapper.redactor().redact(&value);
    let mut bounded = bounded_to(&redacted, max).into_owned();
    mapper.cut_tail(&mut bounded);
    Some(bounded)
}

/// Puts what was read into `discovery`'s metadata, then fits it again.
fn attach(
    discovery: &mut Discovery,
    fetched: Vec<(String, Result<Option<Entry>, String>)>,
    mapper: &ResponseMapper,
) {
    let Some(metadata) = &mut discovery.metadata else {
        return;
    };
    let (mut failed, mut first_failure) = (0usize, None);
    let mut names = Vec::new();
    for (name, result) in fetched {
        match result {
            Ok(Some(entry)) => names.push(NameMetadata {
                metric_type: text(mapper, entry.metric_type, MAX_WORD_CHARS),
                unit: text(mapper, entry.unit, MAX_WORD_CHARS),
                help: text(mapper, entry.help, MAX_HELP_CHARS),
                name,
            }),
            Ok(None) => {}
            Err(why) => {
                failed += 1;
                first_failure.get_or_insert(why);
            }
        }
    }
    metadata.without = discovery.rows.len().saturating_sub(names.len()) as u64;
    metadata.names = names;
    let warning = first_failure.map(|why| {
        format!(
            "the provider's metadata of {failed} listed names could not be read (first: {why}); \
             they count in metadata.without, the names and counts stand"
        )
    });
    discovery
        .warnings
        .extend(text(mapper, warning, 2 * MAX_HELP_CHARS));
    discover::fit(discovery);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prometheus::Redactor;
    use evidence_result::Provider;
    use evidence_result::discovery::{
        Counted, DiscoveryFormat, DiscoveryWindow, Metadata, MetadataSource,
    };
    use evidence_result::evidence::EvidenceOutcome;
    use secrecy::SecretString;
    use std::collections::BTreeMap;

    fn listed(names: &[&str]) -> Discovery {
        Discovery {
            format: DiscoveryFormat::DiscoveryV1,
            discover: DiscoveryKind::MetricMetadata,
            label: None,
            selector: "{cluster_id=\"SaaS01\"}".to_owned(),
            window: DiscoveryWindow { start: 0, end: 60 },
            counted: Counted::SeriesWithSamplesInWindow,
            outcome: EvidenceOutcome::Data,
            total: names.len() as u64,
            more: 0,
            counts_capped_at: None,
            scope: BTreeMap::new(),
            prefixes: Vec::new(),
            columns: vec!["name".to_owned(), "series".to_owned()],
            rows: names
                .iter()
                .map(|n| vec![Cell::Text(Some((*n).to_owned())), Cell::Count(1)])
                .collect(),
            metadata: Some(Metadata {
                source: MetadataSource::ProviderGlobal,
                names: Vec::new(),
                without: names.len() as u64,
            }),
            warnings: Vec::new(),
        }
    }

    fn mapper() -> ResponseMapper {
        ResponseMapper::new(
            Provider::Clinic,
            Redactor::new([SecretString::from("s3cr3t-token-value")]),
        )
    }

    fn at() -> Url {
        Url::parse("http://127.0.0.1:9/api/v1/metadata").unwrap()
    }

    /// The name a metadata URL asks for (its one `metric` parameter).
    fn asked_name(url: &Url) -> String {
        let pairs: Vec<_> = url.query_pairs().collect();
        assert_eq!(pairs.len(), 1, "{url}");
        assert_eq!(pairs[0].0, "metric", "{url}");
        pairs[0].1.clone().into_owned()
    }

    fn ok(body: &str) -> Result<RawResponse, ConnectorError> {
        Ok(RawResponse::new(
            200,
            Some("application/json".to_owned()),
            body.as_bytes().to_vec(),
        ))
    }

    #[tokio::test]
    async fn each_listed_name_is_asked_once_and_its_first_entry_kept() {
        let asked = std::sync::Mutex::new(Vec::new());
        let answer = complete_metadata(
            Answer::Discovery(listed(&["a_total", "b_bytes", "c"])),
            &mapper(),
            &Deadline::none(),
            Some(&at()),
            |url| {
                let name = asked_name(&url);
                asked.lock().unwrap().push(name.clone());
                let body = match name.as_str() {
                    "a_total" => r#"{"status":"success","data":{"a_total":[
                        {"type":"counter","help":"Counts a.","unit":""},
                        {"type":"gauge","help":"Another target's text.","unit":""}]}}"#
                        .to_owned(),
                    "b_bytes" => r#"{"status":"success","data":{"b_bytes":[
                        {"type":"gauge","help":"Bytes, token s3cr3t-token-value.","unit":"bytes"}],
                        "other_name":[{"type":"gauge","help":"not asked","unit":""}]}}"#
                        .to_owned(),
                    _ => r#"{"status":"success","data":{}}"#.to_owned(),
                };
                async move { ok(&body) }
            },
        )
        .await;
        let Answer::Discovery(d) = answer else {
            panic!("a discovery")
        };
        assert_eq!(*asked.lock().unwrap(), ["a_total", "b_bytes", "c"]);
        d.check().unwrap();
        let m = d.metadata.unwrap();
        assert_eq!(m.without, 1, "c has none");
        assert_eq!(m.names[0].metric_type.as_deref(), Some("counter"));
        assert_eq!(m.names[0].unit, None, "an empty unit is left out");
        assert_eq!(m.names[1].help.as_deref(), Some("Bytes, token [REDACTED]."));
        assert_eq!(m.names[1].unit.as_deref(), Some("bytes"));
        assert!(d.warnings.is_empty(), "{:?}", d.warnings);
    }

    #[tokio::test]
    async fn failures_are_one_warning_and_the_rows_stand() {
        let answer = complete_metadata(
            Answer::Discovery(listed(&["a", "b", "c"])),
            &mapper(),
            &Deadline::none(),
            Some(&at()),
            |url| async move {
                let name = asked_name(&url);
                match name.as_str() {
                    "a" => Ok(RawResponse::new(404, None, b"404 page not found".to_vec())),
                    "b" => ok("<html>login</html>"),
                    _ => Err(ConnectorError::BodyTooLarge { limit: 10 }),
                }
            },
        )
        .await;
        let Answer::Discovery(d) = answer else {
            panic!("a discovery")
        };
        d.check().unwrap();
        assert_eq!(d.rows.len(), 3);
        assert_eq!(d.metadata.as_ref().unwrap().without, 3);
        assert_eq!(d.warnings.len(), 1);
        assert!(
            d.warnings[0].contains("3 listed names"),
            "{}",
            d.warnings[0]
        );
        assert!(d.warnings[0].contains("HTTP 404"), "{}", d.warnings[0]);
    }

    #[tokio::test]
    async fn long_help_is_cut_and_a_full_answer_is_fitted_again() {
        let names: Vec<String> = (0..40).map(|i| format!("metric_number_{i:02}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let answer = complete_metadata(
            Answer::Discovery(listed(&refs)),
            &mapper(),
            &Deadline::none(),
            Some(&at()),
            |url| async move {
                let name = asked_name(&url);
                let help = "word ".repeat(100);
                ok(&format!(
                    r#"{{"status":"success","data":{{"{name}":[{{"type":"gauge","help":"{help}","unit":""}}]}}}}"#
                ))
            },
        )
        .await;
        let Answer::Discovery(d) = answer else {
            panic!("a discovery")
        };
        d.check().unwrap();
        let json = serde_json::to_string(&d).unwrap();
        assert!(
            json.len() <= crate::prometheus::MAX_EVIDENCE_BYTES,
            "{}",
            json.len()
        );
        assert!(d.rows.len() < 40 && d.more == 40 - d.rows.len() as u64);
        let help = d.metadata.as_ref().unwrap().names[0]
            .help
            .as_deref()
            .unwrap();
        assert!(help.ends_with(crate::prometheus::CUT_MARK), "{help}");
        assert!(help.chars().count() <= MAX_HELP_CHARS + crate::prometheus::CUT_MARK.len());
    }

    #[test]
    fn the_metadata_url_is_beside_the_query_url() {
        let at = |u: &str| metadata_url(&Url::parse(u).unwrap()).map(|u| u.to_string());
        assert_eq!(
            at("https://c.example/api/v1/clusters/SaaS%2001/prometheus/api/v1/query_range?x=1"),
            Some(
                "https://c.example/api/v1/clusters/SaaS%2001/prometheus/api/v1/metadata".to_owned()
            )
        );
        assert_eq!(at("https://c.example/v2/SaaS01/range"), None);
    }

    #[tokio::test]
    async fn a_series_of_a_family_reads_the_family_s_metadata() {
        let asked = std::sync::Mutex::new(Vec::new());
        let answer = complete_metadata(
            Answer::Discovery(listed(&["rpc_seconds_bucket", "up_total", "plain"])),
            &mapper(),
            &Deadline::none(),
            Some(&at()),
            |url| {
                let name = asked_name(&url);
                asked.lock().unwrap().push(name.clone());
                let body = match name.as_str() {
                    "rpc_seconds" => {
                        r#"{"status":"success","data":{"rpc_seconds":[
                        {"type":"histogram","help":"RPC latency.","unit":""}]}}"#
                    }
                    "up_total" => {
                        r#"{"status":"success","data":{"up_total":[
                        {"type":"counter","help":"Its own entry.","unit":""}]}}"#
                    }
                    _ => r#"{"status":"success","data":{}}"#,
                };
                async move { ok(body) }
            },
        )
        .await;
        let Answer::Discovery(d) = answer else {
            panic!("a discovery")
        };
        d.check().unwrap();
        let mut asked = asked.lock().unwrap().clone();
        asked.sort();
        assert_eq!(
            asked,
            ["plain", "rpc_seconds", "rpc_seconds_bucket", "up_total"],
            "the family only where the name has none and a suffix"
        );
        let m = d.metadata.unwrap();
        assert_eq!(m.names[0].name, "rpc_seconds_bucket");
        assert_eq!(m.names[0].metric_type.as_deref(), Some("histogram"));
        assert_eq!(m.names[1].help.as_deref(), Some("Its own entry."));
        assert_eq!(m.without, 1);
        assert_eq!(family_of("_total"), None);
        assert_eq!(family_of("x_info"), Some("x"));
    }

    #[tokio::test]
    async fn without_a_metadata_path_nothing_is_sent_and_the_warning_says_why() {
        let answer = complete_metadata(
            Answer::Discovery(listed(&["a", "b"])),
            &mapper(),
            &Deadline::none(),
            None,
            |_| async { Err(ConnectorError::Request("nothing is asked".to_owned())) },
        )
        .await;
        let Answer::Discovery(d) = answer else {
            panic!("a discovery")
        };
        d.check().unwrap();
        assert_eq!(d.metadata.as_ref().unwrap().without, 2);
        assert!(d.warnings[0].contains("2 listed names"), "{:?}", d.warnings);
        assert!(d.warnings[0].contains("/query_range"), "{:?}", d.warnings);
    }

    #[tokio::test]
    async fn other_answers_ask_nothing() {
        let mut names = listed(&["a"]);
        names.discover = DiscoveryKind::MetricNames;
        names.metadata = None;
        let answer = complete_metadata(
            Answer::Discovery(names.clone()),
            &mapper(),
            &Deadline::none(),
            Some(&at()),
            |_| async { Err(ConnectorError::Request("nothing is asked".to_owned())) },
        )
        .await;
        assert_eq!(answer, Answer::Discovery(names));
    }
}
