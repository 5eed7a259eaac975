//! The checked string newtype: the one macro behind every type that wraps a string
//! checked on the way in (`QueryId`, `PackageId` and `ErrorCode` here; the ticket key,
//! policy and key ids, the unit label and the instance reference of `evidence-policy`).

/// Declares a checked string newtype.
///
/// ```text
/// evidence_result::checked_string! {
///     /// A ticket key such as `APID-29213`.
///     #[derive(schemars::JsonSchema)]
///     pub struct TicketKey;
///     check: |s| is_ticket_key(s),
///     error: PolicyError = |value| PolicyError::InvalidPolicy(format!("invalid ticket key {value:?}")),
/// }
/// ```
///
/// The type holds shared text (`Arc<str>`: ids are cloned into every result, trail and
/// handoff that names them, and a clone must not allocate). It gets `new` (checks with
/// `check`, a `fn(&str) -> bool`, and refuses with `error`, a `fn(String) -> E`),
/// `as_str`, `TryFrom<String>`, `From<_> for String`, `FromStr`, `Display`, `AsRef<str>`,
/// and serializes as its text, deserializing through `new`. The caller's attributes come
/// first: a derived or hand-written `JsonSchema` is the caller's choice. The calling
/// crate depends on `serde`.
#[doc(hidden)]
#[macro_export]
macro_rules! checked_string {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident;
        check: $check:expr,
        error: $err:ty = $make:expr $(,)?
    ) => {
        $(#[$meta])*
        #[derive(
            Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, ::serde::Serialize,
            ::serde::Deserialize,
        )]
        #[serde(try_from = "String", into = "String")]
        $vis struct $name(::std::sync::Arc<str>);

        impl $name {
            /// Checks and wraps a value.
            pub fn new(
                value: impl ::std::convert::Into<::std::string::String>,
            ) -> ::std::result::Result<Self, $err> {
                let value: ::std::string::String = value.into();
                let check: fn(&str) -> bool = $check;
                if check(&value) {
                    ::std::result::Result::Ok(Self(value.into()))
                } else {
                    let make: fn(::std::string::String) -> $err = $make;
                    ::std::result::Result::Err(make(value))
                }
            }

            /// The value as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl ::std::convert::TryFrom<::std::string::String> for $name {
            type Error = $err;
            fn try_from(value: ::std::string::String) -> ::std::result::Result<Self, $err> {
                Self::new(value)
            }
        }

        impl ::std::convert::From<$name> for ::std::string::String {
            fn from(value: $name) -> Self {
                value.0.as_ref().to_owned()
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $err;
            fn from_str(s: &str) -> ::std::result::Result<Self, $err> {
                Self::new(s)
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl ::std::convert::AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}
