//! What the page says about the browser: `navigator.userAgent` and the client hints of
//! `navigator.userAgentData.brands`.

use std::sync::LazyLock;

use regex::Regex;
use serde::Deserialize;

/// One entry of `navigator.userAgentData.brands`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Brand {
    /// The brand, e.g. `Chromium`, `Google Chrome`, or a GREASE brand such as
    /// `Not=A?Brand`.
    pub brand: String,
    /// Its significant version, e.g. `156`.
    pub version: String,
}

/// The browser as a page of the session sees it, next to what the session reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrowserIdentity {
    /// The session's `browserVersion` capability, e.g. `156.0.8078.108`.
    pub browser_version: String,
    /// The User-Agent the connector started the browser with (`--user-agent`).
    pub launched_user_agent: String,
    /// `navigator.userAgent` in the page.
    pub user_agent: String,
    /// `navigator.userAgentData.brands` in the page; empty where the page does not
    /// expose client hints (not a secure context).
    pub brands: Vec<Brand>,
}

#[expect(
    clippy::expect_used,
    reason = "constant pattern, exercised by the unit tests"
)]
static CHROME_MAJOR: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\bChrome/([0-9]+)\.").expect("valid pattern"));

/// The brands that name the browser itself (the others are GREASE entries).
const BROWSER_BRANDS: [&str; 3] = ["Chromium", "Google Chrome", "HeadlessChrome"];

impl BrowserIdentity {
    /// The major version in `navigator.userAgent` (`Chrome/<major>.`).
    pub fn user_agent_major(&self) -> Option<u32> {
        CHROME_MAJOR
            .captures(&self.user_agent)
            .and_then(|c| c.get(1))
            .and_then(|m| m.as_str().parse().ok())
    }

    /// The major version of the browser's own brand in the client hints.
    pub fn brand_major(&self) -> Option<u32> {
        self.brands
            .iter()
            .find(|b| BROWSER_BRANDS.contains(&b.brand.as_str()))
            .and_then(|b| b.version.split('.').next())
            .and_then(|v| v.parse().ok())
    }

    /// False when the page shows client hints whose major version differs from the
    /// User-Agent's, or a User-Agent without a Chrome major.
    pub fn is_consistent(&self) -> bool {
        match (self.user_agent_major(), self.brand_major()) {
            (Some(ua), Some(brand)) => ua == brand,
            (Some(_), None) => self.brands.is_empty(),
            (None, _) => false,
        }
    }
}

/// The raw answer of the identity script.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PageIdentity {
    pub(crate) user_agent: String,
    #[serde(default)]
    pub(crate) brands: Option<Vec<Brand>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(ua: &str, brands: &[(&str, &str)]) -> BrowserIdentity {
        BrowserIdentity {
            browser_version: "156.0.8078.108".into(),
            launched_user_agent: ua.into(),
            user_agent: ua.into(),
            brands: brands
                .iter()
                .map(|(b, v)| Brand {
                    brand: (*b).into(),
                    version: (*v).into(),
                })
                .collect(),
        }
    }

    #[test]
    fn majors() {
        let ok = identity(
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36",
            &[("Not=A?Brand", "24"), ("Chromium", "156")],
        );
        assert_eq!(ok.user_agent_major(), Some(156));
        assert_eq!(ok.brand_major(), Some(156));
        assert!(ok.is_consistent());
        let stale = identity(
            "Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0.0.0 Safari/537.36",
            &[("Chromium", "156"), ("Not=A?Brand", "99")],
        );
        assert!(!stale.is_consistent());
        assert!(identity("Mozilla/5.0 Chrome/156.0.0.0", &[]).is_consistent());
        assert!(!identity("curl/8", &[]).is_consistent());
    }
}
