//! The one model of a browser storage state (Playwright `storageState` JSON), which the
//! secret binding and the Wetech connector both parse it into, and the one rule for the
//! values it protects, each with its role: a credential (it must be long enough to guard, or the state is
//! refused), page state (guarded when long enough, otherwise left unguarded and listed)
//! or a segment of a JWT-looking value (the whole token is guarded anyway). `rule` decides
//! what the output guard does with each derived value and when a state is refused;
//! `check` reports that, value by value and never quoting one, before a state is rotated in.

mod check;
mod derive;
mod model;
pub(crate) mod rule;

pub use check::{CheckedValue, StateVerdict, StorageStateReport, ValueSource, ValueVerdict, check};
pub use derive::storage_state_values;
pub(crate) use derive::{derive_values, jwt_segments};
pub use model::{Cookie, OriginState, StorageState};
