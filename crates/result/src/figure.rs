//! `Figure`: a sample value as compact evidence prints it, rounded to
//! [`FIGURE_SIGNIFICANT_DIGITS`] significant digits.
//!
//! Statistics are computed on the exact values and rounded once, when they become a
//! figure, so a printed peak is the exact peak correctly rounded to that precision (and
//! not a rounding of a rounding). A figure with no fractional part prints as a JSON
//! integer (`9`, not `9.0`); any other prints in the shortest form that reads back to the
//! same number (`22.84`, `0.0001235`, `1.235e+20`).

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// How many significant digits a [`Figure`] keeps: four, so `22.840000000000387` prints
/// `22.84` and `17.65197704918033` prints `17.65` (relative error at most 0.05 %).
pub const FIGURE_SIGNIFICANT_DIGITS: usize = 4;

/// The largest finite figure (`f64::MAX` rounded down to four significant digits).
const LARGEST: f64 = 1.797e308;

/// Integral figures below this magnitude print as JSON integers (every such `f64` is an
/// exact integer that an `i64` holds).
const EXACT_INTEGER_LIMIT: f64 = 9_007_199_254_740_992.0;

/// A finite value rounded to [`FIGURE_SIGNIFICANT_DIGITS`] significant digits.
///
/// Rounding is idempotent: a figure read back from its JSON is the same figure.
#[derive(Clone, Copy, PartialEq, PartialOrd)]
pub struct Figure(f64);

impl Figure {
    /// Zero.
    pub const ZERO: Figure = Figure(0.0);

    /// Rounds a finite value to four significant digits (half to even on exact ties);
    /// `None` for `NaN` and infinities, which compact evidence counts instead of printing.
    pub fn new(value: f64) -> Option<Figure> {
        value.is_finite().then(|| Figure::round(value))
    }

    /// The rounded value.
    pub fn get(self) -> f64 {
        self.0
    }

    /// Rounds a finite value. Decimal formatting rounds the exact binary value, so the
    /// result is the `f64` nearest to the correctly rounded four-digit decimal.
    fn round(value: f64) -> Figure {
        if value == 0.0 {
            return Figure(0.0);
        }
        let text = format!("{:.*e}", FIGURE_SIGNIFICANT_DIGITS - 1, value);
        let rounded = text.parse::<f64>().unwrap_or(value);
        if rounded.is_finite() {
            Figure(rounded)
        } else {
            Figure(LARGEST.copysign(value))
        }
    }
}

impl fmt::Debug for Figure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for Figure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl From<Figure> for f64 {
    fn from(figure: Figure) -> f64 {
        figure.0
    }
}

impl Serialize for Figure {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let v = self.0;
        if v.fract() == 0.0 && v.abs() < EXACT_INTEGER_LIMIT {
            #[expect(
                clippy::cast_possible_truncation,
                reason = "an integral value below 2^53 in magnitude is an exact i64"
            )]
            let whole = v as i64;
            serializer.serialize_i64(whole)
        } else {
            serializer.serialize_f64(v)
        }
    }
}

impl<'de> Deserialize<'de> for Figure {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = f64::deserialize(deserializer)?;
        Figure::new(value).ok_or_else(|| serde::de::Error::custom("a figure must be finite"))
    }
}

impl JsonSchema for Figure {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("Figure")
    }

    fn json_schema(_generator: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "number",
            "description": "A value rounded to 4 significant digits (an integer when it has no fractional part)."
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn json(v: f64) -> String {
        serde_json::to_string(&Figure::new(v).unwrap()).unwrap()
    }

    #[test]
    fn rounds_to_four_significant_digits() {
        assert_eq!(json(22.840000000000387), "22.84");
        assert_eq!(json(17.65197704918033), "17.65");
        assert_eq!(json(78.6449), "78.64");
        assert_eq!(json(9.0), "9");
        assert_eq!(json(-0.0), "0");
        assert_eq!(json(13_207_024_435.0), "13210000000");
        assert_eq!(json(0.000_123_456), "0.0001235");
        assert_eq!(json(1.23456e20), "1.235e+20");
        assert_eq!(json(f64::MAX), "1.797e+308");
        assert!(Figure::new(f64::NAN).is_none());
        assert!(Figure::new(f64::NEG_INFINITY).is_none());
    }

    proptest! {
        /// Rounding is idempotent, stays within half a unit of the fourth digit, and a
        /// figure reads back from its JSON unchanged.
        #[test]
        fn rounding_is_idempotent_and_close(v in prop::num::f64::NORMAL | prop::num::f64::ZERO) {
            let f = Figure::new(v).unwrap();
            prop_assert_eq!(Figure::new(f.get()).unwrap(), f);
            if v.abs() < 1e300 {
                prop_assert!((f.get() - v).abs() <= v.abs() * 5e-4 + f64::MIN_POSITIVE);
            }
            let back: Figure = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
            prop_assert_eq!(back, f);
        }
    }
}
