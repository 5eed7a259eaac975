//! Deployable package folders: built from a package's reviewable source (manifest,
//! README) and the tool binary itself, which becomes the entrypoint file, listed in
//! `files` and covered by the digest that secrets and policy bind to. And the other way
//! round: a running entrypoint finds its own package folder and refuses to run code that
//! is not that folder's entrypoint; the digest it computes covers the file the process
//! was started from, read once.

use std::path::{Path, PathBuf};

use evidence_package::{MANIFEST_FILE, Package};

use crate::ToolError;
use crate::stamp::FolderStamp;

/// How many folders above the binary its package folder may be (`bin/<tool>` is one).
const MAX_ENTRYPOINT_DEPTH: usize = 4;

/// Builds a deployable folder at `out` (which must not exist or be empty) from the
/// package source at `source` and the tool `binary`: the source's manifest and files,
/// and the binary as the entrypoint (mode 755). Returns the deployable package, its
/// digest recomputed from what was written.
pub fn build_deployable(source: &Path, binary: &Path, out: &Path) -> Result<Package, ToolError> {
    let src = Package::load_source(source)?;
    let occupied = std::fs::read_dir(out)
        .map(|mut entries| entries.next().is_some())
        .unwrap_or(false);
    if occupied {
        return Err(ToolError::Packaging(format!(
            "the output folder {} is not empty",
            out.display()
        )));
    }
    let binary_meta =
        std::fs::metadata(binary).map_err(|e| ToolError::io("read the binary", binary, e))?;
    if !binary_meta.is_file() {
        return Err(ToolError::Packaging(format!(
            "{} is not a file",
            binary.display()
        )));
    }
    create_dir(out)?;
    let manifest_from = source.join(MANIFEST_FILE);
    let manifest_to = out.join(MANIFEST_FILE);
    std::fs::copy(&manifest_from, &manifest_to)
        .map_err(|e| ToolError::io("copy the manifest to", &manifest_to, e))?;
    set_mode(&manifest_to, 0o644)?;
    for file in src.files() {
        let to = out.join(file.path());
        if let Some(parent) = to.parent() {
            create_dir(parent)?;
        }
        let contents = file.contents().ok_or_else(|| {
            ToolError::Packaging(format!("{} of the source is not held", file.path()))
        })?;
        std::fs::write(&to, contents).map_err(|e| ToolError::io("write", &to, e))?;
        set_mode(&to, 0o644)?;
    }
    let entry = out.join(&src.manifest().entrypoint);
    if let Some(parent) = entry.parent() {
        create_dir(parent)?;
    }
    std::fs::copy(binary, &entry).map_err(|e| ToolError::io("copy the binary to", &entry, e))?;
    set_mode(&entry, 0o755)?;
    Ok(Package::load(out)?)
}

/// The binary that is the entrypoint of the package at `source` when it sits next to
/// `exe` (the packaging command's own folder): the entrypoint's file name, which is the
/// tool binary's name (`bin/clinic-tool` -> `clinic-tool`).
pub fn sibling_binary(source: &Path, exe: &Path) -> Result<PathBuf, ToolError> {
    let src = Package::load_source(source)?;
    let name = Path::new(&src.manifest().entrypoint)
        .file_name()
        .ok_or_else(|| ToolError::Packaging("the entrypoint has no file name".to_owned()))?
        .to_owned();
    let dir = exe
        .parent()
        .ok_or_else(|| ToolError::Packaging("the packaging command has no folder".to_owned()))?;
    Ok(dir.join(name))
}

/// The deployable package of the running process: the nearest folder above the
/// running binary with a manifest, loaded with its digest computed once, here, over the
/// file the process was started from (`/proc/self/exe`, never a path that could be
/// swapped after start), which must be that folder's entrypoint (same device and
/// inode). A binary outside a deployable folder, or one that is not its folder's
/// entrypoint, gets an error: it runs nothing.
pub fn own_package() -> Result<Package, ToolError> {
    Ok(running_package()?.0)
}

/// [`own_package`] with the stamp of its folder taken just before it was read: a later
/// stamp that differs means the folder changed on disk after it was hashed.
pub(crate) fn running_package() -> Result<(Package, FolderStamp), ToolError> {
    let exe = std::env::current_exe()
        .map_err(|e| ToolError::io("locate the running binary", "/proc/self/exe", e))?;
    let running = running_file(&exe);
    let exe = exe
        .canonicalize()
        .map_err(|e| ToolError::io("resolve the running binary", &exe, e))?;
    let dir = exe
        .ancestors()
        .skip(1)
        .take(MAX_ENTRYPOINT_DEPTH)
        .find(|d| d.join(MANIFEST_FILE).is_file())
        .ok_or_else(|| {
            ToolError::Packaging(format!(
                "{} is not inside a deployable package folder (no {MANIFEST_FILE} above it)",
                exe.display()
            ))
        })?;
    let stamp = FolderStamp::take(dir)?;
    // Deployable only: a source folder (no binary) does not load here.
    let package = Package::load_running(dir, running)?;
    let entry = dir.join(&package.manifest().entrypoint);
    let entry = entry
        .canonicalize()
        .map_err(|e| ToolError::io("resolve the entrypoint", &entry, e))?;
    if entry != exe {
        return Err(ToolError::Packaging(format!(
            "the running binary is not the entrypoint of the package in {}",
            dir.display()
        )));
    }
    Ok((package, stamp))
}

/// A path that names the file the process was started from whatever happens to other
/// paths: on Linux the kernel's own link to it (`/proc/self/exe` names the executed
/// inode even after its path is replaced).
fn running_file(exe: &Path) -> &Path {
    if cfg!(target_os = "linux") {
        Path::new("/proc/self/exe")
    } else {
        exe
    }
}

fn create_dir(dir: &Path) -> Result<(), ToolError> {
    std::fs::create_dir_all(dir).map_err(|e| ToolError::io("create", dir, e))
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> Result<(), ToolError> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| ToolError::io("set the mode of", path, e))
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) -> Result<(), ToolError> {
    Ok(())
}
