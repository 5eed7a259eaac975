//! The model-visible argument types of the three packages and their JSON Schemas.

use std::borrow::Cow;
use std::fmt;

use evidence_result::{Provider, QueryId, SAME_TURN_CORRECTION_RULE};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::policy::MAX_BATCH;

/// The longest PromQL expression accepted, in bytes.
pub const MAX_EXPR_BYTES: usize = 4096;

/// The longest unit label accepted, in characters.
pub const MAX_UNIT_CHARS: usize = 16;

/// The longest opaque instance reference accepted, in bytes.
pub const MAX_INSTANCE_REF_BYTES: usize = 2048;

/// The largest step accepted, in seconds (31 days).
pub const MAX_STEP_SECONDS: u64 = 31 * 24 * 3600;

const CLINIC_DESCRIPTION: &str = "Query Clinic metrics (Prometheus query_range) for the \
cluster and time window the platform fixed for this ticket. Send a bounded batch of PromQL \
queries; each has its own queryId and is answered in its own item, so one rejected query does \
not stop the others. An item with discover instead of expr is a discovery: before guessing a \
metric name, and after a query answered no_data, ask which metric names, labels, values or \
series exist in this ticket's scope and window (where the platform granted discovery). The \
platform fixes ticket, provider, account, cluster and time window: never send them.";

const MANUS_DESCRIPTION: &str = "Query Manus metrics (Prometheus query_range only) on the \
target (vida or monica) and time window the platform fixed for this ticket. One operation per \
call. Instance addresses come back only as opaque references; instanceRef is one returned by an \
earlier result: pass it back unchanged to bind the query to that instance, which is the only \
way to name an instance. Where the platform granted discovery, discover instead of expr asks \
which metric names, labels, values or series exist in this ticket's scope and window: ask \
before guessing a metric name, and after a query answered no_data. The platform fixes ticket, \
provider, account, cluster, target and time window: never send them.";

const WETECH_DESCRIPTION: &str = "Query Wetech (Grafana) metrics for the cluster and time \
window the platform fixed for this ticket. One operation per call; queryId is required and \
must be one the platform authorized for this ticket; unit is a short plain label. Where the \
platform granted discovery, discover instead of expr (and unit) asks which metric names, \
labels, values or series exist in this ticket's scope and window: ask before guessing a \
metric name, and after a query answered no_data. The platform fixes ticket, provider, \
account, cluster and time window: never send them.";

fn described(schema: &mut Schema, text: &str) {
    schema.insert(
        "description".to_owned(),
        format!("{text}\n\n{SAME_TURN_CORRECTION_RULE}").into(),
    );
}

fn clinic_description(schema: &mut Schema) {
    described(schema, CLINIC_DESCRIPTION);
}

fn manus_description(schema: &mut Schema) {
    query_or_discovery(schema);
    described(schema, MANUS_DESCRIPTION);
}

fn wetech_description(schema: &mut Schema) {
    split(schema, &["expr", "unit"]);
    described(schema, WETECH_DESCRIPTION);
}

/// The keys of a query that a discovery does not take, and those of a discovery.
const QUERY_ONLY: [&str; 4] = ["expr", "step", "unit", "instanceRef"];
const DISCOVERY_ONLY: [&str; 4] = ["discover", "selector", "pattern", "label"];

/// An object that is either a query (`expr`) or a discovery (`discover`): only `queryId`
/// is required of both, and each form refuses the other's keys.
fn query_or_discovery(schema: &mut Schema) {
    split(schema, &["expr"]);
}

/// [`query_or_discovery`], a query requiring `query_required`.
fn split(schema: &mut Schema, query_required: &[&str]) {
    let has = |keys: &[&str]| -> Vec<serde_json::Value> {
        keys.iter()
            .map(|k| serde_json::json!({"required": [k]}))
            .collect()
    };
    schema.insert("required".to_owned(), serde_json::json!(["queryId"]));
    schema.insert(
        "anyOf".to_owned(),
        serde_json::json!([
            {"required": query_required, "not": {"anyOf": has(&DISCOVERY_ONLY)}},
            {"required": ["discover"], "not": {"anyOf": has(&QUERY_ONLY)}}
        ]),
    );
}

fn query_id_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "minLength": 1,
        "maxLength": 64,
        "pattern": "^[A-Za-z0-9_.:-]{1,64}$"
    })
}

fn expr_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_EXPR_BYTES
    })
}

/// The Clinic arguments: a bounded batch of queries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = clinic_description)]
pub struct ClinicArgs {
    /// The queries of this batch (1-20; the platform may allow fewer), each with its own queryId.
    #[schemars(length(min = 1, max = MAX_BATCH))]
    pub queries: Vec<ClinicQuery>,
}

/// One item of a Clinic batch: a query (`expr`) or a discovery (`discover`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = query_or_discovery)]
pub struct ClinicQuery {
    /// Stable id of this diagnostic objective: 1-64 letters, digits, '_', '-', '.', ':'. Keep the same queryId when you correct a rejected request.
    #[schemars(schema_with = "query_id_schema")]
    pub query_id: QueryId,
    /// PromQL expression. The platform binds every selector to the ticket's cluster and evaluates it over the trusted time window; range selectors, subqueries, offset and @ must stay within that window plus its look-back (@ start() and @ end() are fine). At most 4096 bytes and 64 levels of nesting (each parenthesis, bracket, function call, aggregation, subquery and operator in a chain adds a level); deeper expressions are refused with promql_too_deep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "expr_schema")]
    pub expr: Option<String>,
    /// Resolution: a Prometheus duration such as "30s" or "1m", or a whole number of seconds. Omit it for the time window divided by 250, rounded up, and at least the platform's minimum step. A step giving more points than allowed is rejected with the smallest valid step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<Step>,
    /// Short plain unit label of the values, e.g. cores, bytes, %, ops/s: at most 16 letters, digits, '%', '/', '_', '-' or spaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<Unit>,
    /// Instead of expr, a discovery: which metric_names (each with its series count; metric_metadata adds the provider's type, unit and help of each listed name), label_names (each with its number of values), label_values (of label, each with its series count) or series (a sample of label sets, with the total) exist in this ticket's scope and window. Ask before guessing a metric name, and after a query answered no_data. Counts are exact over the window; the answer lists the items with the most series first and says how many more there are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discover: Option<Discover>,
    /// With discover: one vector selector that narrows what is listed, e.g. {job="tikv"} or tikv_engine_size_bytes{type="kv"}; none lists the whole scope. The platform binds it to the ticket's scope as it binds a query's selectors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "expr_schema")]
    pub selector: Option<String>,
    /// With discover metric_names or metric_metadata: an RE2 pattern the whole metric name must match, e.g. tikv_.* (at most 256 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub pattern: Option<String>,
    /// With discover label_values: the label whose values to list, e.g. instance or job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"))]
    pub label: Option<String>,
}

/// The Manus arguments: one `query_range` operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = manus_description)]
pub struct ManusArgs {
    /// Stable id of this diagnostic objective: 1-64 letters, digits, '_', '-', '.', ':'. Keep the same queryId when you correct a rejected request.
    #[schemars(schema_with = "query_id_schema")]
    pub query_id: QueryId,
    /// PromQL expression. The platform binds every selector to the ticket's cluster and evaluates it over the trusted time window; range selectors, subqueries, offset and @ must stay within that window plus its look-back (@ start() and @ end() are fine). At most 4096 bytes and 64 levels of nesting (each parenthesis, bracket, function call, aggregation, subquery and operator in a chain adds a level); deeper expressions are refused with promql_too_deep. Instance addresses never leave: no matcher of any kind on instance or host_ip (pass instanceRef instead), regular-expression matchers only on labels without addresses (job, type, mode, state and the like), exact matchers elsewhere without '.', ':', '[' or ']' unless the value is a plain number; label_replace and label_join may read only labels without addresses, write a new label and use no '.', ':', '[' or ']' in the replacement or separator, and count_values may not write instance or host_ip; otherwise address_label_matcher or address_label_rewrite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "expr_schema")]
    pub expr: Option<String>,
    /// Resolution: a Prometheus duration such as "30s" or "1m", or a whole number of seconds. Omit it for the time window divided by 250, rounded up, and at least the platform's minimum step. A step giving more points than allowed is rejected with the smallest valid step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<Step>,
    /// Opaque instance reference returned by an earlier result of this tool. Pass it back unchanged to bind the query to that instance; it cannot be read, edited or used for the other target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_ref: Option<InstanceRef>,
    /// Instead of expr, a discovery: which metric_names (each with its series count; metric_metadata adds the provider's type, unit and help of each listed name), label_names (each with its number of values), label_values (of label, each with its series count) or series (a sample of label sets, with the total) exist in this ticket's scope and window. Ask before guessing a metric name, and after a query answered no_data. Counts are exact over the window; the answer lists the items with the most series first and says how many more there are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discover: Option<Discover>,
    /// With discover: one vector selector that narrows what is listed, e.g. {job="tikv"} or tikv_engine_size_bytes{type="kv"}; none lists the whole scope. The platform binds it to the ticket's scope as it binds a query's selectors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "expr_schema")]
    pub selector: Option<String>,
    /// With discover metric_names or metric_metadata: an RE2 pattern the whole metric name must match, e.g. tikv_.* (at most 256 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub pattern: Option<String>,
    /// With discover label_values: the label whose values to list, e.g. instance or job; instance values come back as instanceRef references a later query can pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"))]
    pub label: Option<String>,
}

/// The Wetech arguments: one operation with a required, authorized query id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = wetech_description)]
pub struct WetechArgs {
    /// Required. One of the query ids the platform authorized for this ticket. Keep it when you correct a rejected request.
    #[schemars(schema_with = "query_id_schema")]
    pub query_id: QueryId,
    /// PromQL expression. The platform binds every selector to the ticket's cluster and evaluates it over the trusted time window; range selectors, subqueries, offset and @ must stay within that window plus its look-back (@ start() and @ end() are fine). At most 4096 bytes and 64 levels of nesting (each parenthesis, bracket, function call, aggregation, subquery and operator in a chain adds a level); deeper expressions are refused with promql_too_deep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "expr_schema")]
    pub expr: Option<String>,
    /// Required with expr. Short plain unit label of the values, e.g. cores, bytes, %, ops/s: at most 16 letters, digits, '%', '/', '_', '-' or spaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<Unit>,
    /// Resolution: a Prometheus duration such as "30s" or "1m", or a whole number of seconds. Omit it for the time window divided by 250, rounded up, and at least the platform's minimum step. A step giving more points than allowed is rejected with the smallest valid step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<Step>,
    /// Instead of expr, a discovery: which metric_names (each with its series count; metric_metadata adds the provider's type, unit and help of each listed name), label_names (each with its number of values), label_values (of label, each with its series count) or series (a sample of label sets, with the total) exist in this ticket's scope and window. Ask before guessing a metric name, and after a query answered no_data. Counts are exact over the window; the answer lists the items with the most series first and says how many more there are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discover: Option<Discover>,
    /// With discover: one vector selector that narrows what is listed, e.g. {job="tikv"} or tikv_engine_size_bytes{type="kv"}; none lists the whole scope. The platform binds it to the ticket's scope as it binds a query's selectors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "expr_schema")]
    pub selector: Option<String>,
    /// With discover metric_names or metric_metadata: an RE2 pattern the whole metric name must match, e.g. tikv_.* (at most 256 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub pattern: Option<String>,
    /// With discover label_values: the label whose values to list, e.g. instance or job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"))]
    pub label: Option<String>,
}

/// What a discovery lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Discover {
    /// Metric names, each with its series count.
    MetricNames,
    /// Label names, each with its number of values.
    LabelNames,
    /// The values of one label, each with its series count.
    LabelValues,
    /// A sample of the series, as label sets, with the total.
    Series,
    /// Metric names as `metric_names`, with the provider's type, unit and help of each.
    MetricMetadata,
}

/// The Agent-visible JSON Schema of a provider's arguments.
pub fn args_schema(provider: Provider) -> Schema {
    match provider {
        Provider::Clinic => schemars::schema_for!(ClinicArgs),
        Provider::Manus => schemars::schema_for!(ManusArgs),
        Provider::Wetech => schemars::schema_for!(WetechArgs),
    }
}

/// A query step in whole seconds, `1..=31 days`.
///
/// On input it is a Prometheus duration string (`"30s"`, `"1m"`, `"1m30s"`, units `y w d
/// h m s ms` in that order, whole seconds in total) or a whole number of seconds (`30`);
/// on output it is the number of seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Step(u64);

impl Step {
    /// A step of `seconds` (`1..=31 days`).
    pub fn from_seconds(seconds: u64) -> Result<Self, String> {
        if seconds == 0 || seconds > MAX_STEP_SECONDS {
            return Err(format!(
                "step must be between 1 second and {MAX_STEP_SECONDS} seconds"
            ));
        }
        Ok(Step(seconds))
    }

    /// Parses a step from JSON: a duration string or a whole number of seconds.
    pub fn from_json(value: &serde_json::Value) -> Result<Self, String> {
        match value {
            serde_json::Value::Number(n) => {
                if let Some(s) = n.as_u64() {
                    return Step::from_seconds(s);
                }
                match n.as_f64() {
                    Some(f) if f.fract() == 0.0 && f >= 1.0 && f <= MAX_STEP_SECONDS as f64 => {
                        Step::from_seconds(f as u64)
                    }
                    _ => Err(format!(
                        "step {n} is not a whole number of seconds between 1 and {MAX_STEP_SECONDS}"
                    )),
                }
            }
            serde_json::Value::String(s) => Step::parse_duration(s),
            other => Err(format!(
                "step must be a duration string like \"30s\" or a number of seconds, not {}",
                json_kind(other)
            )),
        }
    }

    /// Parses a Prometheus duration string (or a string of digits, read as seconds).
    pub fn parse_duration(text: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "step {text:?} is not a duration like \"30s\", \"1m\" or \"1m30s\" (units y, w, d, h, m, s, ms)"
            )
        };
        if !text.is_empty() && text.len() <= 20 && text.bytes().all(|b| b.is_ascii_digit()) {
            return text
                .parse::<u64>()
                .map_err(|_| bad())
                .and_then(Step::from_seconds);
        }
        const UNITS: [(&str, u128); 7] = [
            ("y", 365 * 86_400_000),
            ("w", 7 * 86_400_000),
            ("d", 86_400_000),
            ("h", 3_600_000),
            ("m", 60_000),
            ("s", 1_000),
            ("ms", 1),
        ];
        let mut rest = text;
        let mut total_ms: u128 = 0;
        let mut next_unit = 0;
        if rest.is_empty() {
            return Err(bad());
        }
        while !rest.is_empty() {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 || digits > 12 {
                return Err(bad());
            }
            let (number, tail) = rest.split_at(digits);
            let number: u128 = number.parse().map_err(|_| bad())?;
            // "ms" must win over "m" followed by "s".
            let found = UNITS
                .iter()
                .enumerate()
                .skip(next_unit)
                .filter(|(_, (u, _))| tail.starts_with(u))
                .max_by_key(|(_, (u, _))| u.len());
            let Some((index, (unit, ms))) = found else {
                return Err(bad());
            };
            total_ms = total_ms.checked_add(number * ms).ok_or_else(bad)?;
            next_unit = index + 1;
            rest = &tail[unit.len()..];
        }
        if !total_ms.is_multiple_of(1000) {
            return Err(format!("step {text:?} is not a whole number of seconds"));
        }
        let seconds = u64::try_from(total_ms / 1000).map_err(|_| bad())?;
        Step::from_seconds(seconds)
    }

    /// The step in seconds.
    pub fn seconds(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}s", self.0)
    }
}

impl Serialize for Step {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for Step {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        Step::from_json(&value).map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for Step {
    fn schema_name() -> Cow<'static, str> {
        "Step".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A Prometheus duration string (units y, w, d, h, m, s, ms in that order; whole seconds in total) or a whole number of seconds.",
            "anyOf": [
                {"type": "integer", "minimum": 1, "maximum": MAX_STEP_SECONDS},
                {"type": "string", "pattern": "^([0-9]+y)?([0-9]+w)?([0-9]+d)?([0-9]+h)?([0-9]+m)?([0-9]+s)?([0-9]+ms)?$|^[0-9]+$", "minLength": 1, "maxLength": 20}
            ]
        })
    }
}

evidence_result::checked_string! {
    /// A short plain unit label such as `cores`, `bytes`, `%` or `ops/s`: 1-16 characters
    /// of ASCII letters, digits, `%`, `/`, `_`, `-` and spaces, not only spaces.
    pub struct Unit;
    check: |value| !value.is_empty()
        && value.chars().count() <= MAX_UNIT_CHARS
        && value.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'%' | b'/' | b'_' | b'-' | b' ')
        })
        && !value.trim().is_empty(),
    error: String = |value| format!(
        "unit {value:?} is not a short plain label: use 1-16 letters, digits, '%', '/', '_', '-' or spaces, e.g. cores, bytes, %"
    ),
}

impl JsonSchema for Unit {
    fn schema_name() -> Cow<'static, str> {
        "Unit".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_UNIT_CHARS,
            "pattern": "^[A-Za-z0-9%/_ -]*[A-Za-z0-9%/_-][A-Za-z0-9%/_ -]*$",
            "description": "A short plain unit label."
        })
    }
}

evidence_result::checked_string! {
    /// An opaque instance reference returned by an earlier Manus result: 1-2048 characters
    /// of ASCII letters, digits and `. _ ~ : + / = -`. Only the Manus connector can read it.
    pub struct InstanceRef;
    check: |value| !value.is_empty()
        && value.len() <= MAX_INSTANCE_REF_BYTES
        && value.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(b, b'.' | b'_' | b'~' | b':' | b'+' | b'/' | b'=' | b'-')
        }),
    error: String = |_| "instanceRef is not an opaque reference from an earlier result; pass one back unchanged or leave it out".to_owned(),
}

impl JsonSchema for InstanceRef {
    fn schema_name() -> Cow<'static, str> {
        "InstanceRef".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_INSTANCE_REF_BYTES,
            "pattern": "^[A-Za-z0-9._~:+/=-]+$",
            "description": "An opaque instance reference."
        })
    }
}

/// A short name of a JSON value's kind, for messages.
pub(crate) fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn steps() {
        for (input, secs) in [
            (json!(30), 30),
            (json!(30.0), 30),
            (json!("30s"), 30),
            (json!("1m"), 60),
            (json!("1m30s"), 90),
            (json!("1h"), 3600),
            (json!("2000ms"), 2),
            (json!("1d"), 86_400),
            (json!("45"), 45),
        ] {
            assert_eq!(Step::from_json(&input).unwrap().seconds(), secs, "{input}");
        }
        for bad in [
            json!(0),
            json!(-5),
            json!(1.5),
            json!("1500ms"),
            json!("s"),
            json!("1s1m"),
            json!("1m1m"),
            json!("inf"),
            json!("-1s"),
            json!("NaN"),
            json!(""),
            json!("1e999"),
            json!(true),
            json!(null),
            json!("99999999999999y"),
        ] {
            assert!(Step::from_json(&bad).is_err(), "{bad}");
        }
        assert!(Step::from_json(&json!(MAX_STEP_SECONDS + 1)).is_err());
    }

    #[test]
    fn units() {
        for ok in ["cores", "bytes", "%", "ops/s", "MiB_per-sec", "a b"] {
            assert!(Unit::new(ok).is_ok(), "{ok}");
        }
        for bad in ["", " ", "x".repeat(17).as_str(), "µs", "a\"b", "a\nb"] {
            assert!(Unit::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn expr_descriptions_state_the_limits() {
        for provider in [Provider::Clinic, Provider::Manus, Provider::Wetech] {
            let schema = serde_json::to_string(&args_schema(provider)).unwrap();
            assert!(
                schema.contains(&format!(
                    "{} levels of nesting",
                    crate::depth::MAX_PROMQL_DEPTH
                )),
                "{provider:?}"
            );
            assert!(schema.contains(&format!("At most {MAX_EXPR_BYTES} bytes")));
        }
    }

    #[test]
    fn schemas_carry_the_rule_and_no_platform_fields() {
        for provider in [Provider::Clinic, Provider::Manus, Provider::Wetech] {
            let schema = args_schema(provider);
            let text = serde_json::to_string(&schema).unwrap();
            let description = schema.get("description").and_then(|d| d.as_str()).unwrap();
            assert!(description.ends_with(SAME_TURN_CORRECTION_RULE));
            assert_eq!(schema.get("additionalProperties"), Some(&json!(false)));
            for forbidden in [
                "\"provider\"",
                "\"cluster",
                "\"ticket",
                "\"account",
                "\"url",
                "\"host",
                "\"window",
                "\"start\"",
                "\"end\"",
            ] {
                assert!(
                    !text.contains(&format!("{forbidden}\":")),
                    "{provider}: {forbidden}"
                );
            }
        }
        let wetech = args_schema(Provider::Wetech);
        let required = wetech.get("required").unwrap();
        assert!(required.as_array().unwrap().contains(&json!("queryId")));
        // A query requires its unit; a discovery takes none.
        let query = wetech.as_value().pointer("/anyOf/0/required").unwrap();
        assert_eq!(query, &json!(["expr", "unit"]));
        let discovery = wetech.as_value().pointer("/anyOf/1/required").unwrap();
        assert_eq!(discovery, &json!(["discover"]));
    }

    #[test]
    fn typed_args_round_trip() {
        let args: WetechArgs = serde_json::from_value(
            json!({"queryId": "cpu", "expr": "up", "unit": "cores", "step": "1m"}),
        )
        .unwrap();
        assert_eq!(args.step.unwrap().seconds(), 60);
        assert!(
            serde_json::from_value::<WetechArgs>(json!({"expr": "up", "unit": "cores"})).is_err()
        );
        assert!(
            serde_json::from_value::<ManusArgs>(
                json!({"queryId": "q", "expr": "up", "provider": "manus"})
            )
            .is_err()
        );
        let clinic: ClinicArgs =
            serde_json::from_value(json!({"queries": [{"queryId": "q", "expr": "up"}]})).unwrap();
        assert_eq!(clinic.queries.len(), 1);
    }
}
