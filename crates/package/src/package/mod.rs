//! A package revision: its normalized manifest, its files and its recomputed digest, as
//! reviewable source (the entrypoint binary not yet built in) or as a deployable folder
//! whose digest covers the binary that runs. The entrypoint binary is hashed as it is
//! read and not held; a running tool hashes the very file it was started from
//! ([`Package::load_running`]).

use std::collections::BTreeSet;
use std::fmt;
use std::fs::File;
use std::path::{Path, PathBuf};

use evidence_result::{Digest, PackageId};
use sha2::{Digest as _, Sha256};

use crate::manifest::MANIFEST_FILE;
use crate::problem::JsonError;
use crate::{Manifest, Revision, manifest::NormalizedManifest};

mod error;

pub use error::{DigestMismatch, LoadError};

/// The version tag that opens the digest framing of a deployable package (domain
/// separation). Version 2: each file's content is hashed with BLAKE3-256 (version 1
/// used SHA-256, which at 2 GB/s cost more than a whole call's budget for a 7 MiB
/// binary; see `BENCHMARKS.md`); the framing itself is still hashed with SHA-256.
pub const PACKAGE_DIGEST_TAG: &[u8] = b"evidence-package-digest/v2\0";

/// The version tag that opens the digest framing of a package's reviewable source (its
/// files without the built entrypoint). A source digest never equals a deployable digest,
/// so nothing signed or bound for one applies to the other.
pub const SOURCE_DIGEST_TAG: &[u8] = b"evidence-package-source-digest/v1\0";

/// What a loaded package folder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PackageKind {
    /// Reviewable source: the manifest and every listed file except the entrypoint,
    /// which is the tool binary a packaging step builds in. It cannot run; its digest is
    /// the source digest ([`SOURCE_DIGEST_TAG`]).
    Source,
    /// A deployable folder: every listed file, the entrypoint binary included, covered by
    /// the digest ([`PACKAGE_DIGEST_TAG`]) that secrets and policy bind to.
    Deployable,
}

/// Largest package file read from disk.
const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// Largest manifest read from disk.
const MAX_MANIFEST_BYTES: u64 = 1024 * 1024;
/// The block size in which an entrypoint binary is read and hashed when it is not the
/// running file: large enough that the per-read cost vanishes, small enough to stay in
/// the CPU's caches.
const HASH_BLOCK_BYTES: usize = 1 << 20;

/// One file of a package: its relative path, its executable bit, its size, and its
/// content, or for a deployable package's entrypoint read from disk only the BLAKE3
/// hash of its content (hashed as it was read, never held).
#[derive(Clone, PartialEq, Eq)]
pub struct PackageFile {
    path: String,
    executable: bool,
    size: u64,
    content: Content,
}

/// What a [`PackageFile`] keeps of its content.
#[derive(Clone, PartialEq, Eq)]
enum Content {
    Held(Vec<u8>),
    Blake3([u8; 32]),
}

impl PackageFile {
    /// A file at `path` (relative, `/`-separated) with this mode and content.
    pub fn new(path: impl Into<String>, executable: bool, contents: impl Into<Vec<u8>>) -> Self {
        let contents = contents.into();
        PackageFile {
            path: path.into(),
            executable,
            size: contents.len() as u64,
            content: Content::Held(contents),
        }
    }

    /// A file known by its size and the BLAKE3 hash of its content only.
    fn hashed(path: String, executable: bool, size: u64, blake3: [u8; 32]) -> Self {
        PackageFile {
            path,
            executable,
            size,
            content: Content::Blake3(blake3),
        }
    }

    /// The relative path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Whether the file is executable.
    pub fn is_executable(&self) -> bool {
        self.executable
    }

    /// The size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The content; `None` for the entrypoint binary of a package loaded from disk,
    /// which is hashed as it is read and not held.
    pub fn contents(&self) -> Option<&[u8]> {
        match &self.content {
            Content::Held(bytes) => Some(bytes),
            Content::Blake3(_) => None,
        }
    }

    /// The content's hash as framing `tag` takes it: SHA-256 for a source digest,
    /// BLAKE3-256 for a deployable one.
    fn content_hash(&self, tag: &[u8]) -> Result<[u8; 32], LoadError> {
        match (&self.content, tag == SOURCE_DIGEST_TAG) {
            (Content::Held(bytes), true) => Ok(Sha256::digest(bytes).into()),
            (Content::Held(bytes), false) => Ok(*blake3::hash(bytes).as_bytes()),
            (Content::Blake3(hash), false) => Ok(*hash),
            (Content::Blake3(_), true) => Err(LoadError::BuiltFileInSource(self.path.clone())),
        }
    }
}

impl fmt::Debug for PackageFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PackageFile")
            .field("path", &self.path)
            .field("executable", &self.executable)
            .field("bytes", &self.size)
            .field("held", &matches!(self.content, Content::Held(_)))
            .finish()
    }
}

/// A package revision whose manifest is normalized and whose digest was computed from its
/// content here, never taken from anything written down.
#[derive(Debug, Clone, PartialEq)]
pub struct Package {
    manifest: NormalizedManifest,
    files: Vec<PackageFile>,
    digest: Digest,
    kind: PackageKind,
}

impl Package {
    /// Builds a package from a manifest and its files.
    ///
    /// The manifest is normalized; the files must be exactly the listed ones, and the
    /// entrypoint must be executable.
    pub fn new(manifest: &Manifest, files: Vec<PackageFile>) -> Result<Self, LoadError> {
        Package::build(manifest, files, PackageKind::Deployable)
    }

    /// Builds a package's reviewable source from a manifest and its files: exactly the
    /// listed files except the entrypoint, which must be absent (the tool binary is built
    /// in by packaging, never committed beside the source).
    pub fn source(manifest: &Manifest, files: Vec<PackageFile>) -> Result<Self, LoadError> {
        Package::build(manifest, files, PackageKind::Source)
    }

    fn build(
        manifest: &Manifest,
        files: Vec<PackageFile>,
        kind: PackageKind,
    ) -> Result<Self, LoadError> {
        let manifest = manifest.normalize()?;
        let mut files = files;
        files.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
        let listed: BTreeSet<&str> = manifest.files.iter().map(String::as_str).collect();
        let mut present = BTreeSet::new();
        for file in &files {
            if !present.insert(file.path.as_str()) {
                return Err(LoadError::DuplicatePath {
                    field: "files".to_owned(),
                    path: file.path.clone(),
                });
            }
            if !listed.contains(file.path.as_str()) {
                return Err(LoadError::UnlistedFile(file.path.clone()));
            }
        }
        let entrypoint = manifest.entrypoint.as_str();
        let expected = |path: &&&str| kind == PackageKind::Deployable || **path != entrypoint;
        if let Some(missing) = listed
            .iter()
            .filter(expected)
            .find(|p| !present.contains(*p))
        {
            return Err(LoadError::MissingFile((*missing).to_owned()));
        }
        let entry = files.iter().find(|f| f.path == manifest.entrypoint);
        let tag = match (kind, entry) {
            (PackageKind::Deployable, None) => {
                return Err(LoadError::MissingFile(manifest.entrypoint.clone()));
            }
            (PackageKind::Deployable, Some(entry)) if !entry.executable => {
                return Err(LoadError::EntrypointNotExecutable(entry.path.clone()));
            }
            (PackageKind::Deployable, Some(_)) => PACKAGE_DIGEST_TAG,
            (PackageKind::Source, Some(entry)) => {
                return Err(LoadError::BuiltFileInSource(entry.path.clone()));
            }
            (PackageKind::Source, None) => SOURCE_DIGEST_TAG,
        };
        let digest = package_digest(tag, &manifest, &files)?;
        Ok(Package {
            manifest,
            files,
            digest,
            kind,
        })
    }

    /// Loads a deployable package from its folder: `manifest.json` and every listed
    /// file, the entrypoint binary included, with its executable bit. Files the manifest
    /// does not list, symbolic links and other special files are refused. The digest is
    /// recomputed. A source folder (no entrypoint) is refused with
    /// [`LoadError::MissingFile`].
    pub fn load(dir: &Path) -> Result<Self, LoadError> {
        let (manifest, files) = read_folder(dir, None)?;
        Package::new(&manifest, files)
    }

    /// Loads the deployable package of a running tool: like [`Package::load`], but the
    /// entrypoint's content is read from `running`, a path that names the file the
    /// process was started from whatever happens to other paths (on Linux,
    /// `/proc/self/exe`), which must be the very file (device and inode) at the
    /// folder's entrypoint path. The digest so covers the code that runs, not whatever
    /// a path names later. A running binary's file cannot be written (the kernel
    /// refuses with `ETXTBSY`), so it is hashed through a memory map, on every core.
    pub fn load_running(dir: &Path, running: &Path) -> Result<Self, LoadError> {
        let (manifest, files) = read_folder(dir, Some(running))?;
        Package::new(&manifest, files)
    }

    /// Loads a package's reviewable source from its folder: like [`Package::load`], but
    /// the entrypoint must be absent (see [`Package::source`]).
    pub fn load_source(dir: &Path) -> Result<Self, LoadError> {
        let (manifest, files) = read_folder(dir, None)?;
        Package::source(&manifest, files)
    }

    /// Loads a folder as whatever it is: deployable when the entrypoint is present,
    /// source otherwise. For catalogs that record either kind; a tool sandbox uses
    /// [`Package::load`].
    pub fn load_any(dir: &Path) -> Result<Self, LoadError> {
        let (manifest, files) = read_folder(dir, None)?;
        let entrypoint = manifest.normalize()?.entrypoint.clone();
        if files.iter().any(|f| f.path == entrypoint) {
            Package::new(&manifest, files)
        } else {
            Package::source(&manifest, files)
        }
    }

    /// Whether this is reviewable source or a deployable folder.
    pub fn kind(&self) -> PackageKind {
        self.kind
    }

    /// The normalized manifest.
    pub fn manifest(&self) -> &NormalizedManifest {
        &self.manifest
    }

    /// The package identity.
    pub fn identity(&self) -> &PackageId {
        &self.manifest.identity
    }

    /// The revision.
    pub fn revision(&self) -> Revision {
        self.manifest.revision
    }

    /// The files, sorted by the bytes of their paths.
    pub fn files(&self) -> &[PackageFile] {
        &self.files
    }

    /// The package digest, computed from the content.
    pub fn digest(&self) -> Digest {
        self.digest
    }

    /// Compares a digest written somewhere (a pin, a catalog file) with the recomputed
    /// one.
    pub fn verify_digest(&self, stated: &Digest) -> Result<(), DigestMismatch> {
        if *stated == self.digest {
            Ok(())
        } else {
            Err(DigestMismatch {
                what: format!("{} {}", self.identity(), self.revision()),
                stated: *stated,
                actual: self.digest,
            })
        }
    }
}

/// Reads a package folder: its manifest and every file below it. The entrypoint is
/// hashed as it is read and not held; with `running`, its content comes from that open
/// file, which must be the file at the entrypoint path.
fn read_folder(
    dir: &Path,
    running: Option<&Path>,
) -> Result<(Manifest, Vec<PackageFile>), LoadError> {
    let manifest_path = dir.join(MANIFEST_FILE);
    let bytes = read_capped(&manifest_path, MAX_MANIFEST_BYTES)?;
    let manifest: Manifest = serde_json::from_slice(&bytes).map_err(|source| {
        LoadError::Json(JsonError::new(manifest_path.display().to_string(), source))
    })?;
    let entrypoint = manifest.normalize()?.entrypoint.clone();
    let mut walk = Walk {
        root: dir,
        entrypoint: &entrypoint,
        running,
        running_found: false,
        files: Vec::new(),
    };
    walk.collect(dir)?;
    if running.is_some() && !walk.running_found {
        return Err(LoadError::MissingFile(entrypoint));
    }
    Ok((manifest, walk.files))
}

/// Computes the package digest.
///
/// SHA-256 over this framing (integers are unsigned big-endian):
///
/// ```text
/// "evidence-package-digest/v2\0"            version tag (source:
///                                           "evidence-package-source-digest/v1\0")
/// u64 file count
/// per file, in byte order of its path:
///     u64 path length, path bytes (UTF-8)
///     u8  executable bit (0 or 1)
///     u64 size in bytes
///     32  hash of the content: BLAKE3-256 (deployable, v2), SHA-256 (source, v1)
/// 32  SHA-256 of the normalized manifest in RFC 8785 canonical JSON
/// ```
///
/// and written `sha256:` + lowercase hex.
fn package_digest(
    tag: &[u8],
    manifest: &NormalizedManifest,
    files: &[PackageFile],
) -> Result<Digest, LoadError> {
    let mut sorted: Vec<&PackageFile> = files.iter().collect();
    sorted.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
    let mut h = Sha256::new();
    h.update(tag);
    h.update((sorted.len() as u64).to_be_bytes());
    for file in sorted {
        h.update((file.path.len() as u64).to_be_bytes());
        h.update(file.path.as_bytes());
        h.update([u8::from(file.executable)]);
        h.update(file.size.to_be_bytes());
        h.update(file.content_hash(tag)?);
    }
    let canonical = manifest.canonical_json()?;
    h.update(Sha256::digest(canonical.as_bytes()));
    Ok(Digest::Sha256(h.finalize().into()))
}

fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, LoadError> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| LoadError::io(path, e))?;
    if !meta.file_type().is_file() {
        return Err(LoadError::invalid(
            "files",
            format!("{} is not a regular file", path.display()),
        ));
    }
    if meta.len() > cap {
        return Err(LoadError::invalid(
            "files",
            format!("{} is larger than {cap} bytes", path.display()),
        ));
    }
    std::fs::read(path).map_err(|e| LoadError::io(path, e))
}

#[cfg(unix)]
fn is_executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(_meta: &std::fs::Metadata) -> bool {
    false
}

/// The walk over a package folder.
struct Walk<'a> {
    root: &'a Path,
    entrypoint: &'a str,
    running: Option<&'a Path>,
    running_found: bool,
    files: Vec<PackageFile>,
}

impl Walk<'_> {
    fn collect(&mut self, dir: &Path) -> Result<(), LoadError> {
        let entries = std::fs::read_dir(dir).map_err(|e| LoadError::io(dir, e))?;
        let mut paths: Vec<PathBuf> = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| LoadError::io(dir, e))?;
            paths.push(entry.path());
        }
        paths.sort();
        for path in paths {
            let meta = std::fs::symlink_metadata(&path).map_err(|e| LoadError::io(&path, e))?;
            let relative = path
                .strip_prefix(self.root)
                .ok()
                .and_then(|p| p.to_str())
                .map(|p| p.replace(std::path::MAIN_SEPARATOR, "/"))
                .ok_or_else(|| LoadError::InvalidPath {
                    field: "files".to_owned(),
                    path: path.display().to_string(),
                    reason: "not a UTF-8 path inside the package",
                })?;
            let kind = meta.file_type();
            if kind.is_dir() {
                self.collect(&path)?;
            } else if kind.is_file() {
                if relative == MANIFEST_FILE {
                    continue;
                }
                let executable = is_executable(&meta);
                let file = if relative != self.entrypoint {
                    PackageFile::new(relative, executable, read_capped(&path, MAX_FILE_BYTES)?)
                } else if let Some(running) = self.running {
                    if !same_file(&meta, running, &path)? {
                        return Err(LoadError::invalid(
                            "entrypoint",
                            format!(
                                "{} is not the file the running process was started from",
                                path.display()
                            ),
                        ));
                    }
                    self.running_found = true;
                    hash_running(relative, executable, running, meta.len())?
                } else {
                    let file = File::open(&path).map_err(|e| LoadError::io(&path, e))?;
                    hash_file(relative, executable, &file, &path)?
                };
                self.files.push(file);
            } else {
                return Err(LoadError::InvalidPath {
                    field: "files".to_owned(),
                    path: relative,
                    reason: "symbolic links and special files are refused",
                });
            }
        }
        Ok(())
    }
}

/// Whether the directory entry `meta` (of `path`) and the file `running` names are one
/// file.
#[cfg(unix)]
fn same_file(meta: &std::fs::Metadata, running: &Path, path: &Path) -> Result<bool, LoadError> {
    use std::os::unix::fs::MetadataExt as _;
    let running = std::fs::metadata(running).map_err(|e| LoadError::io(path, e))?;
    Ok(meta.dev() == running.dev() && meta.ino() == running.ino())
}

#[cfg(not(unix))]
fn same_file(_meta: &std::fs::Metadata, _running: &Path, _path: &Path) -> Result<bool, LoadError> {
    Ok(false)
}

/// Hashes the running binary (refusing it above the file bound) through a memory map,
/// on every core: its file cannot change while it runs.
fn hash_running(
    relative: String,
    executable: bool,
    running: &Path,
    size: u64,
) -> Result<PackageFile, LoadError> {
    if size > MAX_FILE_BYTES {
        return Err(LoadError::invalid(
            "files",
            format!(
                "{} is larger than {MAX_FILE_BYTES} bytes",
                running.display()
            ),
        ));
    }
    let mut hasher = blake3::Hasher::new();
    hasher
        .update_mmap_rayon(running)
        .map_err(|e| LoadError::io(running, e))?;
    Ok(PackageFile::hashed(
        relative,
        executable,
        size,
        *hasher.finalize().as_bytes(),
    ))
}

/// Reads at `offset`. A positioned read: the handle's own offset (shared with anyone
/// else holding it) is neither used nor moved.
#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

#[cfg(not(unix))]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let mut file = file;
    file.seek(SeekFrom::Start(offset))?;
    file.read(buf)
}

/// Hashes an open file from its start in [`HASH_BLOCK_BYTES`] blocks (refusing it above
/// the file bound), holding one block at a time.
fn hash_file(
    relative: String,
    executable: bool,
    file: &File,
    path: &Path,
) -> Result<PackageFile, LoadError> {
    let mut hasher = blake3::Hasher::new();
    let mut block = vec![0u8; HASH_BLOCK_BYTES];
    let mut size: u64 = 0;
    loop {
        let n = match read_at(file, &mut block, size) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(LoadError::io(path, e)),
        };
        if n == 0 {
            break;
        }
        size += n as u64;
        if size > MAX_FILE_BYTES {
            return Err(LoadError::invalid(
                "files",
                format!("{} is larger than {MAX_FILE_BYTES} bytes", path.display()),
            ));
        }
        hasher.update(&block[..n]);
    }
    Ok(PackageFile::hashed(
        relative,
        executable,
        size,
        *hasher.finalize().as_bytes(),
    ))
}
