//! The session capability of a diagnosis session whose tool servers run apart from the
//! agent: a random [`SessionToken`] the runtime mints once per session and gives the
//! agent side (OpenCode sends it as a header), and its [`Digest`], which every policy the
//! runtime signs for that session names ([`crate::TrustedPolicy::session`]).
//!
//! The token is a bearer capability and nothing more: it carries no policy, no key and
//! no provider secret, and it is 256 random bits from the operating system, so one
//! session's token says nothing about another's. A tool server keeps envelopes by the
//! token's digest, never by the token, and a policy names the digest only: the token
//! itself is never written into a policy, an envelope, an audit record or a log.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use evidence_result::Digest;
use rand::RngCore as _;
use secrecy::{ExposeSecret as _, SecretString};

use crate::{PolicyError, TrustedPolicy};

/// The number of random bytes in a token: 32 (256 bits).
pub const SESSION_TOKEN_BYTES: usize = 32;

/// The length of a token's text: the base64url (no padding) of [`SESSION_TOKEN_BYTES`].
pub const SESSION_TOKEN_CHARS: usize = 43;

/// A session token: [`SESSION_TOKEN_BYTES`] random bytes written as base64url without
/// padding ([`SESSION_TOKEN_CHARS`] characters). Held as a secret: its `Debug` shows
/// only the digest.
#[derive(Clone)]
pub struct SessionToken(SecretString);

impl SessionToken {
    /// A new token from the operating system's random source.
    pub fn mint() -> Self {
        let mut bytes = [0u8; SESSION_TOKEN_BYTES];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        let token = SessionToken(SecretString::from(URL_SAFE_NO_PAD.encode(bytes)));
        zeroize::Zeroize::zeroize(&mut bytes);
        token
    }

    /// Reads a token as a client presents it (surrounding white space ignored). Anything
    /// but [`SESSION_TOKEN_CHARS`] base64url characters that decode to
    /// [`SESSION_TOKEN_BYTES`] bytes is refused, without echoing the text.
    pub fn parse(text: &str) -> Result<Self, PolicyError> {
        let text = text.trim();
        let bad = || {
            PolicyError::InvalidSessionToken(format!(
                "a session token is {SESSION_TOKEN_CHARS} base64url characters (the text given \
                 is {} characters and is not shown)",
                text.chars().count()
            ))
        };
        if text.len() != SESSION_TOKEN_CHARS {
            return Err(bad());
        }
        match URL_SAFE_NO_PAD.decode(text) {
            Ok(bytes) if bytes.len() == SESSION_TOKEN_BYTES => {
                Ok(SessionToken(SecretString::from(text.to_owned())))
            }
            _ => Err(bad()),
        }
    }

    /// The digest a policy of this session names: the SHA-256 of the token's text.
    pub fn digest(&self) -> Digest {
        Digest::sha256(self.0.expose_secret().as_bytes())
    }

    /// The token's text, for the one place it goes: the agent side's environment.
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }
}

impl fmt::Debug for SessionToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SessionToken").field(&self.digest()).finish()
    }
}

/// Checks that `policy` is for the session a call presents (`presented`: the digest of
/// the token the call came with, or none for a call that came without one): a policy
/// naming a session serves only calls presenting that session's token, and a call
/// presenting a token runs only under a policy signed for its session.
pub fn check_session(
    policy: &TrustedPolicy,
    presented: Option<&Digest>,
) -> Result<(), PolicyError> {
    let mismatch = |why: &str| Err(PolicyError::SessionMismatch(why.to_owned()));
    match (policy.session.as_ref(), presented) {
        (None, None) => Ok(()),
        (Some(bound), Some(presented)) if bound == presented => Ok(()),
        (Some(_), Some(_)) => mismatch("the trusted policy is bound to another session"),
        (Some(_), None) => mismatch(
            "the trusted policy is bound to a session: it is served only to a call that \
             presents that session's token",
        ),
        (None, Some(_)) => mismatch(
            "the trusted policy names no session: a call that presents a session token runs \
             only under a policy signed for that session",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_tokens_read_back_and_differ() {
        let (a, b) = (SessionToken::mint(), SessionToken::mint());
        assert_eq!(a.expose().len(), SESSION_TOKEN_CHARS);
        assert_ne!(a.expose(), b.expose());
        assert_ne!(a.digest(), b.digest());
        let read = SessionToken::parse(&format!(" {}\n", a.expose())).unwrap();
        assert_eq!(read.digest(), a.digest());
        assert!(!format!("{a:?}").contains(a.expose()));
    }

    #[test]
    fn anything_but_a_token_is_refused_without_echo() {
        let secret_looking = "hunter2-hunter2-hunter2-hunter2-hunter2-hun";
        for text in [
            "",
            "short",
            &"A".repeat(44),
            "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!",
            "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
            secret_looking,
        ] {
            let refused = SessionToken::parse(text);
            let shown = refused.map(|_| ()).unwrap_err().to_string();
            if !text.is_empty() && text.len() > 5 {
                assert!(!shown.contains(text), "{shown}");
            }
        }
        // A 43-character base64url text whose last character carries bits beyond
        // 32 bytes is not canonical and is refused too.
        assert!(SessionToken::parse(&format!("{}B", "A".repeat(42))).is_err());
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    fn policy_for(session: Option<Digest>) -> TrustedPolicy {
        let mut policy: TrustedPolicy =
            serde_json::from_value(crate::policy::tests::seed_json()).unwrap();
        policy.session = session;
        policy
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// A policy serves exactly the calls that present its own session's token: any
        /// other token, no token for a session policy, or a token for a policy of no
        /// session is refused.
        #[test]
        fn a_policy_serves_only_its_own_session(
            bound in proptest::option::of(proptest::array::uniform32(any::<u8>())),
            presented in proptest::option::of(proptest::array::uniform32(any::<u8>())),
        ) {
            let token = |bytes: [u8; 32]| SessionToken::parse(&URL_SAFE_NO_PAD.encode(bytes)).unwrap();
            let bound = bound.map(|b| token(b).digest());
            let presented = presented.map(|b| token(b).digest());
            let policy = policy_for(bound);
            let served = check_session(&policy, presented.as_ref()).is_ok();
            prop_assert_eq!(served, bound == presented);
        }
    }
}
