//! A secret given as a file: every secret variable `NAME` also accepts `NAME_FILE`, the
//! path of a file holding the value, the convention of systemd's `LoadCredential=`
//! (`$CREDENTIALS_DIRECTORY`), Kubernetes Secret volumes and Docker secrets. The file is
//! read once, when the process reads its runtime context, so the value never is in the
//! process environment (which children inherit and `/proc/<pid>/environ` shows). A file
//! other users could read is refused, with the rule PostgreSQL applies to its key file:
//! owned by the process's own user, no permission for group or others (`0600` or less);
//! owned by root, read for the group at most (`0640` or less: what a Kubernetes Secret
//! volume gives with `fsGroup`). One trailing line end is not part of the value.

use std::io::Read as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use secrecy::SecretString;

/// The largest secret file read (a Wetech storage state is the largest secret; its
/// variable form is bounded by the environment's own limit, far below this).
pub const MAX_SECRET_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// The variable that names the file form of the secret variable `name`: `NAME_FILE`.
pub fn file_variable(name: &str) -> String {
    format!("{name}_FILE")
}

/// Why a secret file cannot be used. The messages name the path and the mode, never
/// any of the file's content.
#[derive(Debug, thiserror::Error)]
pub enum SecretFileError {
    /// Both the variable and its file form are set.
    #[error("both {name} and {name}_FILE are set: give the secret one way only")]
    BothForms {
        /// The secret variable.
        name: String,
    },
    /// The path is not absolute.
    #[error("{path} is not an absolute path")]
    NotAbsolute {
        /// The path as given.
        path: PathBuf,
    },
    /// The file cannot be opened, inspected or read.
    #[error("{path} cannot be read: {source}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The path is not a regular file.
    #[error("{path} is not a regular file")]
    NotAFile {
        /// The file.
        path: PathBuf,
    },
    /// Other users than the process's could read or change the file.
    #[error(
        "{path} is open to other users (mode {mode:04o}, owner uid {owner}): a secret file \
         must be owned by this process's user with mode 0600 or less, or by root with mode \
         0640 or less"
    )]
    OpenToOthers {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
        /// Its owner's user id.
        owner: u32,
    },
    /// The file holds nothing (or only a line end).
    #[error("{path} is empty")]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// The file is larger than [`MAX_SECRET_FILE_BYTES`].
    #[error("{path} is larger than {MAX_SECRET_FILE_BYTES} bytes")]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
    /// The file is not UTF-8 text.
    #[error("{path} is not UTF-8 text")]
    NotText {
        /// The file.
        path: PathBuf,
    },
}

/// The secret `name` from its two forms as given (`None`: unset or empty): the value of
/// the variable, or the file its `NAME_FILE` names, read now; `None` when neither is
/// given. Both at once are refused; a file's refusal is prefixed with `NAME_FILE`.
pub fn secret_of_forms(
    name: &str,
    value: Option<String>,
    file: Option<String>,
) -> Result<Option<SecretString>, String> {
    match (value, file) {
        (Some(_), Some(_)) => Err(SecretFileError::BothForms {
            name: name.to_owned(),
        }
        .to_string()),
        (Some(value), None) => Ok(Some(SecretString::from(value))),
        (None, Some(path)) => read_secret_file(Path::new(&path))
            .map(Some)
            .map_err(|e| format!("{}: {e}", file_variable(name))),
        (None, None) => Ok(None),
    }
}

/// Whether a file of this owner and mode is closed to other users, for a process whose
/// effective user is `process_uid`.
pub(crate) fn closed_to_others(owner: u32, mode: u32, process_uid: u32) -> bool {
    let mode = mode & 0o7777;
    if owner == process_uid {
        mode & 0o077 == 0
    } else if owner == 0 {
        mode & 0o037 == 0
    } else {
        false
    }
}

/// Reads the secret held by the file at `path` under the rules of this module.
pub fn read_secret_file(path: &Path) -> Result<SecretString, SecretFileError> {
    if !path.is_absolute() {
        return Err(SecretFileError::NotAbsolute {
            path: path.to_owned(),
        });
    }
    let unreadable = |source| SecretFileError::Unreadable {
        path: path.to_owned(),
        source,
    };
    // The checks read the opened file's own metadata, so they judge what is read.
    let file = std::fs::File::open(path).map_err(unreadable)?;
    let meta = file.metadata().map_err(unreadable)?;
    if !meta.is_file() {
        return Err(SecretFileError::NotAFile {
            path: path.to_owned(),
        });
    }
    let process_uid = rustix::process::geteuid().as_raw();
    if !closed_to_others(meta.uid(), meta.mode(), process_uid) {
        return Err(SecretFileError::OpenToOthers {
            path: path.to_owned(),
            mode: meta.mode() & 0o7777,
            owner: meta.uid(),
        });
    }
    let mut bytes = Vec::new();
    file.take(MAX_SECRET_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() as u64 > MAX_SECRET_FILE_BYTES {
        return Err(SecretFileError::TooLarge {
            path: path.to_owned(),
        });
    }
    let text = String::from_utf8(bytes).map_err(|_| SecretFileError::NotText {
        path: path.to_owned(),
    })?;
    let value = strip_line_end(&text);
    if value.is_empty() {
        return Err(SecretFileError::Empty {
            path: path.to_owned(),
        });
    }
    Ok(SecretString::from(value.to_owned()))
}

/// The text without one trailing `\n` or `\r\n` (what `echo` and most editors add).
fn strip_line_end(text: &str) -> &str {
    text.strip_suffix('\n')
        .map(|t| t.strip_suffix('\r').unwrap_or(t))
        .unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use secrecy::ExposeSecret as _;
    use std::os::unix::fs::PermissionsExt as _;

    fn file_with(dir: &Path, name: &str, content: &[u8], mode: u32) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, content).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn a_private_file_is_read_without_its_line_end() {
        let dir = tempfile::tempdir().unwrap();
        for (content, value) in [
            (&b"token-1\n"[..], "token-1"),
            (b"token-2\r\n", "token-2"),
            (b"token-3", "token-3"),
            (b"two\nlines\n", "two\nlines"),
        ] {
            let path = file_with(dir.path(), "s", content, 0o600);
            let read = read_secret_file(&path).unwrap();
            assert_eq!(read.expose_secret(), value);
        }
    }

    #[test]
    fn each_bad_file_gets_its_own_error_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let open = file_with(dir.path(), "open", b"v", 0o644);
        let e = read_secret_file(&open).unwrap_err();
        assert!(matches!(
            e,
            SecretFileError::OpenToOthers { mode: 0o644, .. }
        ));
        let text = e.to_string();
        assert!(
            text.contains(&open.display().to_string()) && text.contains("0644"),
            "{text}"
        );
        let empty = file_with(dir.path(), "empty", b"\n", 0o600);
        assert!(matches!(
            read_secret_file(&empty),
            Err(SecretFileError::Empty { .. })
        ));
        let missing = dir.path().join("missing");
        assert!(matches!(
            read_secret_file(&missing),
            Err(SecretFileError::Unreadable { .. })
        ));
        assert!(matches!(
            read_secret_file(Path::new("relative/secret")),
            Err(SecretFileError::NotAbsolute { .. })
        ));
        assert!(matches!(
            read_secret_file(dir.path()),
            Err(SecretFileError::NotAFile { .. })
        ));
        let binary = file_with(dir.path(), "binary", &[0xff, 0xfe], 0o600);
        assert!(matches!(
            read_secret_file(&binary),
            Err(SecretFileError::NotText { .. })
        ));
        let large = dir.path().join("large");
        std::fs::write(&large, vec![b'a'; MAX_SECRET_FILE_BYTES as usize + 1]).unwrap();
        std::fs::set_permissions(&large, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(matches!(
            read_secret_file(&large),
            Err(SecretFileError::TooLarge { .. })
        ));
    }

    #[test]
    fn no_error_shows_the_content() {
        let dir = tempfile::tempdir().unwrap();
        let open = file_with(dir.path(), "open", b"s3cr3t-value", 0o640);
        let e = read_secret_file(&open).unwrap_err();
        assert!(!e.to_string().contains("s3cr3t") && !format!("{e:?}").contains("s3cr3t"));
    }

    proptest! {
        /// Security rule: a secret file is used only when no user but the process's (and
        /// root, which owns it) can read or change it.
        #[test]
        fn a_secret_file_is_used_only_when_closed_to_other_users(
            mode in 0u32..0o10000,
            owner in prop_oneof![Just(0u32), Just(1000u32), Just(1001u32)],
            process in prop_oneof![Just(0u32), Just(1000u32)],
        ) {
            let accepted = closed_to_others(owner, mode, process);
            let others_bits = mode & 0o007;
            let group_bits = mode & 0o070;
            if accepted {
                prop_assert_eq!(others_bits, 0);
                prop_assert!(owner == process || owner == 0);
                if owner == process {
                    prop_assert_eq!(group_bits, 0);
                } else {
                    prop_assert_eq!(group_bits & 0o030, 0);
                }
            } else {
                prop_assert!(
                    others_bits != 0
                        || (owner != process && owner != 0)
                        || (owner == process && group_bits != 0)
                        || group_bits & 0o030 != 0
                );
            }
        }
    }

    #[test]
    fn the_file_variable_is_the_name_with_file() {
        assert_eq!(file_variable("CLINIC_API_TOKEN"), "CLINIC_API_TOKEN_FILE");
    }
}
