//! The warm browser's flags of `wetech-tool`'s servers (`--mcp`, `--mcp-http`): when
//! the browser kept between calls is replaced besides when it dies or stops answering
//! ([`BROWSER_MAX_CALLS_FLAG`], [`BROWSER_MAX_PSS_FLAG`]). Any other tool, and the
//! one-shot entrypoint (a browser per call), refuse them.

use std::ffi::OsString;

use evidence_connectors::BrowserReuse;

/// The calls one warm browser serves before it is replaced
/// (default [`BrowserReuse::DEFAULT_MAX_CALLS`]).
pub const BROWSER_MAX_CALLS_FLAG: &str = "--browser-max-calls";
/// The summed `Pss` of the warm browser's process tree, in MiB, past which it is
/// replaced after the call that found it (default [`BrowserReuse::DEFAULT_MAX_PSS_MIB`]).
pub const BROWSER_MAX_PSS_FLAG: &str = "--browser-max-pss-mib";

/// A browser flag without a usable value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{flag} needs a whole number above zero")]
pub struct BrowserFlagsError {
    flag: String,
}

/// The warm browser's bounds as the command line gave them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BrowserFlags {
    reuse: BrowserReuse,
    given: bool,
}

impl BrowserFlags {
    /// Takes the browser flags and their values out of `args` (wherever they stand);
    /// the rest stays in order. A value that is not a whole number above zero is a
    /// usage error.
    pub fn take_from(args: &mut Vec<OsString>) -> Result<Self, BrowserFlagsError> {
        let mut flags = BrowserFlags::default();
        let mut rest = Vec::with_capacity(args.len());
        let mut iter = std::mem::take(args).into_iter();
        while let Some(arg) = iter.next() {
            let name = arg.to_str().unwrap_or_default();
            if name != BROWSER_MAX_CALLS_FLAG && name != BROWSER_MAX_PSS_FLAG {
                rest.push(arg);
                continue;
            }
            let value: u32 = iter
                .next()
                .and_then(|v| v.to_str()?.parse().ok())
                .filter(|v| *v > 0)
                .ok_or_else(|| BrowserFlagsError {
                    flag: name.to_owned(),
                })?;
            if name == BROWSER_MAX_CALLS_FLAG {
                flags.reuse.max_calls = value;
            } else {
                flags.reuse.max_pss_mib = value;
            }
            flags.given = true;
        }
        *args = rest;
        Ok(flags)
    }

    /// Whether the command line gave any of them.
    pub fn given(&self) -> bool {
        self.given
    }

    /// The bounds: the flags', defaults for those not given.
    pub fn reuse(&self) -> BrowserReuse {
        self.reuse
    }

    /// The arguments that give these bounds again (none when none was given).
    pub(crate) fn to_args(self) -> Vec<String> {
        if !self.given {
            return Vec::new();
        }
        vec![
            BROWSER_MAX_CALLS_FLAG.to_owned(),
            self.reuse.max_calls.to_string(),
            BROWSER_MAX_PSS_FLAG.to_owned(),
            self.reuse.max_pss_mib.to_string(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn flags_come_out_of_the_arguments_and_go_back_in() {
        let mut given = args(&[
            "--mcp",
            "--browser-max-calls",
            "7",
            "--browser-max-pss-mib",
            "900",
        ]);
        let flags = BrowserFlags::take_from(&mut given).unwrap();
        assert_eq!(given, args(&["--mcp"]));
        assert!(flags.given());
        assert_eq!(flags.reuse().max_calls, 7);
        assert_eq!(flags.reuse().max_pss_mib, 900);
        let mut again = args(&["--mcp"]);
        again.extend(flags.to_args().into_iter().map(OsString::from));
        assert_eq!(BrowserFlags::take_from(&mut again).unwrap(), flags);

        let mut none = args(&["--mcp"]);
        let flags = BrowserFlags::take_from(&mut none).unwrap();
        assert!(!flags.given());
        assert_eq!(flags.reuse(), BrowserReuse::default());
        assert!(flags.to_args().is_empty());

        for bad in [
            &["--browser-max-calls"][..],
            &["--browser-max-calls", "0"],
            &["--browser-max-pss-mib", "x"],
        ] {
            assert!(BrowserFlags::take_from(&mut args(bad)).is_err(), "{bad:?}");
        }
    }
}
