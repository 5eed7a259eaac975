//! The Agent-visible argument schemas, taken from `evidence-policy`'s argument types.

use evidence_result::Provider;
use serde_json::Value;

/// The Agent-visible argument schema of a provider's package, with its tool description:
/// the JSON Schema of `evidence_policy::ClinicArgs`, `ManusArgs` or `WetechArgs`. A
/// package manifest's `arguments` is exactly this.
pub fn argument_schema(provider: Provider) -> Value {
    Value::from(evidence_policy::args::args_schema(provider))
}
