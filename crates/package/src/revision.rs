//! Package revision numbers: `v1`, `v2`, ...

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A revision that is not `v` and a positive number.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum RevisionError {
    /// The text or number is not a revision.
    #[error("field `revision`: {0}")]
    Invalid(String),
}

/// A package revision, written `v` and a positive number (`v3`).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Revision(u32);

impl Revision {
    /// The revision with this number; zero is refused.
    pub fn new(number: u32) -> Result<Self, RevisionError> {
        if number == 0 {
            return Err(RevisionError::Invalid("revisions start at v1".to_owned()));
        }
        Ok(Revision(number))
    }

    /// The revision number.
    pub fn number(self) -> u32 {
        self.0
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.0)
    }
}

impl fmt::Debug for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Revision {
    type Err = RevisionError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || RevisionError::Invalid(format!("{s:?} is not `v` and a positive number"));
        let digits = s.strip_prefix('v').ok_or_else(bad)?;
        if digits.is_empty()
            || digits.starts_with('0')
            || !digits.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(bad());
        }
        let n: u32 = digits.parse().map_err(|_| bad())?;
        Revision::new(n)
    }
}

impl TryFrom<String> for Revision {
    type Error = RevisionError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        value.parse()
    }
}

impl From<Revision> for String {
    fn from(value: Revision) -> Self {
        value.to_string()
    }
}

impl JsonSchema for Revision {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Revision".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^v[1-9][0-9]*$",
            "description": "package revision: 'v' and a positive number"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        let r: Revision = "v3".parse().unwrap();
        assert_eq!(r.number(), 3);
        assert_eq!(r.to_string(), "v3");
        for bad in ["3", "v0", "v03", "v", "V3", "v3a", "v-1"] {
            assert!(bad.parse::<Revision>().is_err(), "{bad}");
        }
        assert!(Revision::new(2).unwrap() < Revision::new(10).unwrap());
        assert_eq!(serde_json::to_string(&r).unwrap(), "\"v3\"");
    }
}
