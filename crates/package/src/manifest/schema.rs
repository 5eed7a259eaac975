//! The argument schema's subschema checks: no `provider` property anywhere, no object
//! open to unnamed properties, no reference outside the schema.

use serde_json::Value;

use super::error::ManifestError;

/// Keywords whose value is a map of names to subschemas.
const SCHEMA_MAPS: [&str; 5] = [
    "properties",
    "$defs",
    "definitions",
    "dependentSchemas",
    "patternProperties",
];
/// Keywords whose value is one subschema.
const SCHEMA_ONE: [&str; 10] = [
    "items",
    "additionalProperties",
    "unevaluatedProperties",
    "additionalItems",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
];
/// Keywords whose value is a list of subschemas.
const SCHEMA_LISTS: [&str; 4] = ["allOf", "anyOf", "oneOf", "prefixItems"];

fn is_provider_name(name: &str) -> bool {
    name.eq_ignore_ascii_case("provider")
}

/// Refuses an argument schema that names a `provider` property anywhere (nested too, in
/// definitions, in `required`), that leaves an object open to unnamed properties, or that
/// refers to an external schema.
pub(crate) fn check_argument_schema(schema: &Value) -> Result<(), ManifestError> {
    if !schema.is_object() {
        return Err(ManifestError::invalid(
            "arguments",
            "must be a JSON Schema object",
        ));
    }
    check_subschema(schema, "arguments", 0)
}

fn check_subschema(schema: &Value, at: &str, depth: usize) -> Result<(), ManifestError> {
    if depth > 64 {
        return Err(ManifestError::invalid(
            at,
            "schema nests deeper than 64 levels",
        ));
    }
    let map = match schema {
        Value::Object(map) => map,
        Value::Bool(_) => return Ok(()),
        _ => return Err(ManifestError::invalid(at, "not a JSON Schema")),
    };
    if let Some(props) = map.get("properties") {
        let props = props
            .as_object()
            .ok_or_else(|| ManifestError::invalid(format!("{at}.properties"), "not an object"))?;
        if let Some(name) = props.keys().find(|k| is_provider_name(k)) {
            return Err(ManifestError::ProviderArgument {
                field: format!("{at}.properties.{name}"),
            });
        }
    }
    if let Some(Value::Array(required)) = map.get("required")
        && required
            .iter()
            .any(|r| r.as_str().is_some_and(is_provider_name))
    {
        return Err(ManifestError::ProviderArgument {
            field: format!("{at}.required"),
        });
    }
    let typed_object = match map.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => false,
    };
    if map.contains_key("patternProperties")
        || ((typed_object || map.contains_key("properties"))
            && map.get("additionalProperties") != Some(&Value::Bool(false)))
    {
        return Err(ManifestError::OpenArgumentObject {
            field: at.to_owned(),
        });
    }
    if let Some(reference) = map.get("$ref")
        && !reference.as_str().is_some_and(|r| r.starts_with("#/"))
    {
        return Err(ManifestError::invalid(
            format!("{at}.$ref"),
            "only references inside the schema are allowed",
        ));
    }
    for key in SCHEMA_MAPS {
        if let Some(Value::Object(children)) = map.get(key) {
            for (name, child) in children {
                check_subschema(child, &format!("{at}.{key}.{name}"), depth + 1)?;
            }
        }
    }
    for key in SCHEMA_ONE {
        match map.get(key) {
            Some(Value::Array(children)) => {
                for (i, child) in children.iter().enumerate() {
                    check_subschema(child, &format!("{at}.{key}[{i}]"), depth + 1)?;
                }
            }
            Some(child) => check_subschema(child, &format!("{at}.{key}"), depth + 1)?,
            None => {}
        }
    }
    for key in SCHEMA_LISTS {
        if let Some(Value::Array(children)) = map.get(key) {
            for (i, child) in children.iter().enumerate() {
                check_subschema(child, &format!("{at}.{key}[{i}]"), depth + 1)?;
            }
        }
    }
    Ok(())
}
