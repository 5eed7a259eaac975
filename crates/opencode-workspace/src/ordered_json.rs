//! A JSON value that keeps object keys in document order.
//!
//! `opencode.json` permission objects are evaluated "last matching rule wins", so key order
//! carries meaning; `serde_json::Value` sorts keys (its `preserve_order` feature would change
//! the map type for every crate of the build), so merging into a user's file uses this type.

use std::fmt;

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A JSON value whose objects keep their key order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Array(Vec<Json>),
    Object(Object),
}

/// An ordered JSON object without duplicate keys.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Object(Vec<(String, Json)>);

impl Object {
    pub(crate) fn new() -> Self {
        Self(Vec::new())
    }

    pub(crate) fn get(&self, key: &str) -> Option<&Json> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub(crate) fn get_mut(&mut self, key: &str) -> Option<&mut Json> {
        self.0.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Replaces the value in place when the key exists, appends it otherwise.
    pub(crate) fn insert(&mut self, key: impl Into<String>, value: Json) {
        let key = key.into();
        match self.get_mut(&key) {
            Some(slot) => *slot = value,
            None => self.0.push((key, value)),
        }
    }

    /// Inserts at the front when the key is absent; leaves an existing value alone.
    pub(crate) fn insert_front_if_absent(&mut self, key: impl Into<String>, value: Json) {
        let key = key.into();
        if self.get(&key).is_none() {
            self.0.insert(0, (key, value));
        }
    }

    pub(crate) fn remove(&mut self, key: &str) -> Option<Json> {
        let index = self.0.iter().position(|(k, _)| k == key)?;
        Some(self.0.remove(index).1)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &Json)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }
}

impl Json {
    pub(crate) fn str(value: impl Into<String>) -> Self {
        Self::String(value.into())
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Self::String(s) => Some(s),
            _ => None,
        }
    }

    pub(crate) fn as_object(&self) -> Option<&Object> {
        match self {
            Self::Object(o) => Some(o),
            _ => None,
        }
    }

    pub(crate) fn as_u64(&self) -> Option<u64> {
        match self {
            Self::Number(n) => n.as_u64(),
            _ => None,
        }
    }

    /// Pretty JSON (two-space indent) with a trailing newline.
    pub(crate) fn to_pretty(&self) -> Result<String, serde_json::Error> {
        let mut text = serde_json::to_string_pretty(self)?;
        text.push('\n');
        Ok(text)
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Null => s.serialize_unit(),
            Self::Bool(b) => s.serialize_bool(*b),
            Self::Number(n) => n.serialize(s),
            Self::String(v) => s.serialize_str(v),
            Self::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Self::Object(object) => {
                let mut map = s.serialize_map(Some(object.0.len()))?;
                for (k, v) in &object.0 {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Number(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Json, E> {
        Ok(Json::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json, E> {
        serde_json::Number::from_f64(v)
            .map(Json::Number)
            .ok_or_else(|| E::custom("a number that is not finite"))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Json, E> {
        Ok(Json::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Json, E> {
        Ok(Json::String(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut object = Object::new();
        while let Some((key, value)) = map.next_entry::<String, Json>()? {
            if object.get(&key).is_some() {
                return Err(de::Error::custom(format!("duplicate key {key:?}")));
            }
            object.0.push((key, value));
        }
        Ok(Json::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_key_order_and_round_trips() {
        let text = "{\n  \"z\": 1,\n  \"*\": \"deny\",\n  \"$HOME/x\": [\n    true,\n    null,\n    1.5,\n    \"s\"\n  ]\n}\n";
        let value: Json = serde_json::from_str(text).unwrap();
        assert_eq!(value.to_pretty().unwrap(), text);
    }

    #[test]
    fn refuses_duplicate_keys() {
        assert!(serde_json::from_str::<Json>("{\"a\":1,\"a\":2}").is_err());
    }

    #[test]
    fn insert_replaces_in_place() {
        let mut o = Object::new();
        o.insert("a", Json::Null);
        o.insert("b", Json::Null);
        o.insert("a", Json::Bool(true));
        o.insert_front_if_absent("c", Json::Null);
        o.insert_front_if_absent("a", Json::Null);
        let keys: Vec<_> = o.iter().map(|(k, _)| k.to_owned()).collect();
        assert_eq!(keys, ["c", "a", "b"]);
        assert_eq!(o.get("a"), Some(&Json::Bool(true)));
        assert!(o.remove("b").is_some());
        assert!(o.remove("b").is_none());
    }
}
