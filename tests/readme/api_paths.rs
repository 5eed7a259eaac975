//! The drift check of Rust paths: every `crate::path::item` a Markdown file names (in
//! prose, inline code or a code block), for a crate whose public API is committed in
//! `api/<crate>.txt` (`tests/public_api.rs` keeps those current), resolves in that
//! snapshot: through public modules and re-exports to an item, and after a type to one
//! of its methods, associated constants, variants, public fields or the items of a trait
//! it implements. A renamed or moved item then fails here with the file and line that
//! still names the old path.
//!
//! `internal` (a crate's `#[doc(hidden)]` module for tests and benches, which the
//! snapshot leaves out) is accepted as a module without looking inside.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::files::MarkdownFile;

/// The crates a document may name, with the snapshot file of each.
pub(crate) const SNAPSHOTS: [(&str, &str); 7] = [
    ("evidence_result", "api/result.txt"),
    ("evidence_policy", "api/policy.txt"),
    ("evidence_package", "api/package.txt"),
    ("evidence_connectors", "api/connectors.txt"),
    ("evidence_materialize", "api/materialize.txt"),
    ("evidence_tool", "api/tool.txt"),
    ("opencode_workspace", "api/opencode-workspace.txt"),
];

/// Members every type has through a derive or a standard trait that a document may
/// call (`ServerLimits::default()`), by the trait that gives them.
const STD_MEMBERS: [(&str, &str); 8] = [
    ("Default", "default"),
    ("FromStr", "from_str"),
    ("Display", "to_string"),
    ("Clone", "clone"),
    ("From", "from"),
    ("TryFrom", "try_from"),
    ("Serialize", "serialize"),
    ("Deserialize", "deserialize"),
];

/// The public surface of one crate, as its snapshot lists it.
#[derive(Debug, Default)]
struct Api {
    /// Every module path an item lives in (public or not), and the public modules.
    modules: BTreeSet<Vec<String>>,
    public_modules: BTreeSet<Vec<String>>,
    /// Items by their path (module path and name).
    items: BTreeSet<Vec<String>>,
    /// Re-exports: module path -> name -> the path it names (as written: `self`,
    /// `super`, `crate`, a child module or another crate first).
    reexports: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>,
    /// Glob re-exports: module path -> the module paths it re-exports.
    globs: BTreeMap<Vec<String>, Vec<Vec<String>>>,
    /// Members by type or trait name: methods, constants, variants, fields.
    members: BTreeMap<String, BTreeSet<String>>,
    /// The traits each type implements, by name.
    traits: BTreeMap<String, BTreeSet<String>>,
}

/// The snapshots of every crate in [`SNAPSHOTS`], read from `root`.
#[derive(Debug)]
pub(crate) struct Snapshots {
    crates: BTreeMap<String, Api>,
}

fn segments(path: &str) -> Vec<String> {
    path.split("::")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The identifier at the start of `text`.
fn ident(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// `text` split at `sep` where no bracket of `<>`, `()`, `[]` or `{}` is open.
fn split_top(text: &str, sep: char) -> Vec<&str> {
    let (mut depth, mut start, mut out) = (0i32, 0, Vec::new());
    for (i, c) in text.char_indices() {
        match c {
            '<' | '(' | '[' | '{' => depth += 1,
            '>' | ')' | ']' | '}' => depth -= 1,
            c if c == sep && depth == 0 => {
                out.push(&text[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

/// The text inside the outermost `{ ... }` of `text`.
fn braced(text: &str) -> Option<&str> {
    let open = text.find('{')?;
    let close = text.rfind('}')?;
    (close > open).then(|| &text[open + 1..close])
}

/// The paths of one `use` tree as the snapshot prints it
/// (`a :: { b , c :: { d , e as f } , }`): (name it is known by, path it names).
fn use_paths(tree: &str) -> Vec<(String, Vec<String>)> {
    let tree: String = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let tree = tree
        .replace(" :: ", "::")
        .replace(":: ", "::")
        .replace(" ::", "::");
    let mut out = Vec::new();
    expand(&tree, &mut Vec::new(), &mut out);
    out
}

fn expand(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<(String, Vec<String>)>) {
    let tree = tree.trim();
    if tree.is_empty() {
        return;
    }
    if let Some(open) = tree.find('{') {
        let head = segments(&tree[..open]);
        let depth = prefix.len();
        prefix.extend(head);
        for part in split_top(braced(tree).unwrap_or_default(), ',') {
            expand(part, prefix, out);
        }
        prefix.truncate(depth);
        return;
    }
    let (path, alias) = match tree.split_once(" as ") {
        Some((path, alias)) => (path, Some(alias.trim())),
        None => (tree, None),
    };
    let mut full = prefix.clone();
    full.extend(segments(path));
    if full.last().is_some_and(|s| s == "self") {
        full.pop();
    }
    let name = alias
        .map(str::to_owned)
        .or_else(|| full.last().cloned())
        .unwrap_or_default();
    out.push((name, full));
}

impl Api {
    fn parse(text: &str) -> Api {
        let mut api = Api::default();
        api.modules.insert(Vec::new());
        for line in text.lines() {
            let line = line.strip_prefix("#[non_exhaustive] ").unwrap_or(line);
            let (kind, rest) = match line.strip_prefix("impl") {
                Some(rest) => ("impl", rest),
                None => line.split_once(' ').unwrap_or((line, "")),
            };
            match kind {
                "use" => api.reexport(rest),
                "impl" => api.implementation(rest),
                "mod" => {
                    let path = segments(rest);
                    api.public_modules.insert(path.clone());
                    api.modules.insert(path.clone());
                    api.item(path);
                }
                "macro" => api.item(vec![rest.trim_end_matches('!').to_owned()]),
                "struct" | "enum" | "trait" | "fn" | "const" | "static" | "type" => {
                    let end = rest
                        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                        .unwrap_or(rest.len());
                    let path = segments(rest[..end].trim_end_matches(':'));
                    let name = path.last().cloned().unwrap_or_default();
                    match kind {
                        "enum" => api.variants(&name, rest),
                        "struct" => api.fields(&name, rest),
                        "trait" => api.trait_items(&name, rest),
                        _ => {}
                    }
                    api.item(path);
                }
                _ => {}
            }
        }
        api
    }

    fn item(&mut self, path: Vec<String>) {
        for n in 0..path.len() {
            self.modules.insert(path[..n].to_vec());
        }
        self.items.insert(path);
    }

    fn member(&mut self, owner: &str, name: &str) {
        if !name.is_empty() {
            self.members
                .entry(owner.to_owned())
                .or_default()
                .insert(name.to_owned());
        }
    }

    /// `use TREE in MODULE::self`.
    fn reexport(&mut self, rest: &str) {
        let Some((tree, module)) = rest.rsplit_once(" in ") else {
            return;
        };
        let mut module = segments(module);
        if module.last().is_some_and(|s| s == "self") {
            module.pop();
        }
        for (name, path) in use_paths(tree) {
            if name == "*" {
                let target = path[..path.len() - 1].to_vec();
                self.globs.entry(module.clone()).or_default().push(target);
            } else {
                self.reexports
                    .entry(module.clone())
                    .or_default()
                    .insert(name, path);
            }
        }
    }

    fn variants(&mut self, owner: &str, rest: &str) {
        for variant in split_top(braced(rest).unwrap_or_default(), ',') {
            self.member(owner, ident(variant.trim()));
        }
    }

    fn fields(&mut self, owner: &str, rest: &str) {
        for field in split_top(braced(rest).unwrap_or_default(), ',') {
            if let Some(field) = field.trim().strip_prefix("pub ")
                && let Some((name, _)) = field.split_once(':')
            {
                self.member(owner, name.trim());
            }
        }
    }

    fn trait_items(&mut self, owner: &str, rest: &str) {
        for member in split_top(braced(rest).unwrap_or_default(), ';') {
            let words: Vec<&str> = member.split_whitespace().collect();
            if let Some(at) = words
                .iter()
                .position(|w| matches!(*w, "fn" | "const" | "type"))
                && let Some(name) = words.get(at + 1)
            {
                self.member(owner, ident(name));
            }
        }
    }

    /// `impl<G> TYPE : fn name ...`, `impl TYPE : const NAME: T` or
    /// `impl<G> TRAIT for TYPE`.
    fn implementation(&mut self, rest: &str) {
        let rest = rest.replace(" :: ", "::");
        let mut rest = rest.trim_start();
        if rest.starts_with('<') {
            // The generics end where the bracket opened at the start closes.
            let mut depth = 0i32;
            for (i, c) in rest.char_indices() {
                depth += match c {
                    '<' => 1,
                    '>' => -1,
                    _ => 0,
                };
                if depth == 0 {
                    rest = rest[i + 1..].trim_start();
                    break;
                }
            }
        }
        let type_name = |parts: &[&str]| {
            let head = parts.first().copied().unwrap_or_default();
            head.rsplit("::").next().unwrap_or_default().to_owned()
        };
        let parts = split_top(rest, ' ');
        match parts.iter().position(|p| matches!(*p, "for" | ":")) {
            Some(at) if parts[at] == "for" => {
                let owner = type_name(&parts[at + 1..]);
                let trait_name = type_name(&parts[..at]);
                self.traits.entry(owner).or_default().insert(trait_name);
            }
            Some(at) => {
                let owner = type_name(&parts[..at]);
                let words = &parts[at + 1..];
                if let Some(at) = words.iter().position(|w| matches!(*w, "fn" | "const"))
                    && let Some(name) = words.get(at + 1)
                {
                    self.member(&owner, ident(name));
                }
            }
            None => {}
        }
    }

    /// Whether `name` is a member of the type or trait `owner`.
    fn has_member(&self, owner: &str, name: &str, all: &Snapshots) -> bool {
        let direct = |api: &Api, owner: &str| {
            api.members
                .get(owner)
                .is_some_and(|members| members.contains(name))
        };
        if direct(self, owner) {
            return true;
        }
        self.traits.get(owner).is_some_and(|traits| {
            traits.iter().any(|t| {
                all.crates.values().any(|api| direct(api, t))
                    || STD_MEMBERS.iter().any(|(s, m)| s == t && *m == name)
            })
        })
    }
}

impl Snapshots {
    /// The committed snapshots below `root`.
    pub(crate) fn read(root: &Path) -> Snapshots {
        Snapshots::from_texts(SNAPSHOTS.iter().map(|(name, file)| {
            let text =
                std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
            ((*name).to_owned(), text)
        }))
    }

    fn from_texts(texts: impl IntoIterator<Item = (String, String)>) -> Snapshots {
        Snapshots {
            crates: texts
                .into_iter()
                .map(|(name, text)| (name, Api::parse(&text)))
                .collect(),
        }
    }

    /// Why `path` (`evidence_tool::mcp::ENVELOPES_PATH`) does not resolve, or `None`
    /// when it does (or names a crate without a snapshot).
    pub(crate) fn unresolved(&self, path: &str) -> Option<String> {
        let segs = segments(path);
        let (krate, rest) = segs.split_first()?;
        self.crates.get(krate)?;
        match self.resolve(krate, &[], rest, true, 0) {
            true => None,
            false => Some(format!(
                "{path} is not in the public API of {krate} (api/*.txt)"
            )),
        }
    }

    /// Whether `rest`, looked up in `module` of `krate`, names something; `public` when
    /// the path is one a reader writes (through public modules only).
    fn resolve(
        &self,
        krate: &str,
        module: &[String],
        rest: &[String],
        public: bool,
        depth: usize,
    ) -> bool {
        let Some(api) = self.crates.get(krate) else {
            return true; // another crate (std, serde, ...): not ours to check
        };
        let Some((first, after)) = rest.split_first() else {
            return api.modules.contains(module);
        };
        if depth > 16 {
            return false;
        }
        let mut here = module.to_vec();
        here.push(first.clone());
        if first == "internal" && module.is_empty() {
            return true;
        }
        // A child module.
        let module_ok = if public {
            api.public_modules.contains(&here)
        } else {
            api.modules.contains(&here)
        };
        if module_ok && self.resolve(krate, &here, after, public, depth + 1) {
            return true;
        }
        // An item of this module, then perhaps a member of it.
        if api.items.contains(&here) && !api.modules.contains(&here) {
            return match after {
                [] => true,
                [member] => api.has_member(first, member, self),
                _ => false,
            };
        }
        if api.items.contains(&here) && after.is_empty() {
            return true;
        }
        // A re-export of this module.
        if let Some(target) = api.reexports.get(module).and_then(|r| r.get(first)) {
            let Some((target_crate, target_module, target_rest)) =
                self.locate(krate, module, target)
            else {
                return true;
            };
            let mut full = target_rest.clone();
            full.extend(after.iter().cloned());
            if self.resolve(&target_crate, &target_module, &full, false, depth + 1) {
                return true;
            }
            // A name the snapshot re-exports without listing its item (one a macro
            // defines): the name is checked, not what follows it.
            if !self.resolve(
                &target_crate,
                &target_module,
                &target_rest,
                false,
                depth + 1,
            ) {
                return true;
            }
        }
        // A glob re-export of this module.
        api.globs.get(module).is_some_and(|globs| {
            globs.iter().any(|glob| {
                self.locate(krate, module, &[glob.clone(), vec![first.clone()]].concat())
                    .is_some_and(|(c, m, mut r)| {
                        r.extend(after.iter().cloned());
                        self.resolve(&c, &m, &r, false, depth + 1)
                    })
            })
        })
    }

    /// Where a re-exported `path`, written in `module` of `krate`, starts: the crate, the
    /// module it is relative to, and the segments to look up there.
    fn locate(
        &self,
        krate: &str,
        module: &[String],
        path: &[String],
    ) -> Option<(String, Vec<String>, Vec<String>)> {
        let (first, rest) = path.split_first()?;
        let mut base = module.to_vec();
        match first.as_str() {
            "crate" => Some((krate.to_owned(), Vec::new(), rest.to_vec())),
            "self" => Some((krate.to_owned(), base, rest.to_vec())),
            "super" => {
                base.pop();
                let mut path = rest.to_vec();
                while path.first().is_some_and(|s| s == "super") {
                    base.pop();
                    path.remove(0);
                }
                Some((krate.to_owned(), base, path))
            }
            other if self.crates.contains_key(other) => {
                Some((other.to_owned(), Vec::new(), rest.to_vec()))
            }
            _ => {
                let api = self.crates.get(krate)?;
                base.push(first.clone());
                if api.modules.contains(&base) || api.items.contains(&base) {
                    Some((krate.to_owned(), module.to_vec(), path.to_vec()))
                } else {
                    // An external crate this one re-exports from.
                    Some(("external".to_owned(), Vec::new(), Vec::new()))
                }
            }
        }
    }
}

/// The crate paths `text` names: `evidence_tool::mcp::ENVELOPES_PATH`, and each path of a
/// brace group (`evidence_tool::{ClinicTool, RuntimeContext}`), with their lines.
pub(crate) fn named_paths(text: &str) -> Vec<(usize, String)> {
    let crates: Vec<&str> = SNAPSHOTS.iter().map(|(c, _)| *c).collect();
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut at = 0;
        while at < line.len() {
            let Some(found) = crates
                .iter()
                .filter_map(|c| line[at..].find(&format!("{c}::")).map(|i| (at + i, *c)))
                .min()
            else {
                break;
            };
            let (start, krate) = found;
            let before = line[..start].chars().next_back();
            at = start + krate.len();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let tail = &line[at..];
            let end = tail
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(tail.len());
            let path = tail[..end].trim_end_matches(':');
            if tail[end..].starts_with('{') && tail[..end].ends_with("::") {
                if let Some(close) = tail[end..].find('}') {
                    for part in tail[end + 1..end + close].split(',') {
                        let part = part.split(" as ").next().unwrap_or_default().trim();
                        if !part.is_empty() && part != "self" && part != "*" {
                            out.push((n + 1, format!("{krate}{path}::{part}")));
                        }
                    }
                }
            } else if !path.is_empty() {
                out.push((n + 1, format!("{krate}{path}")));
            }
            at += end;
        }
    }
    out
}

/// Every crate path the files name that does not resolve, as `FILE:LINE: why`.
pub(crate) fn unresolved_paths(files: &[MarkdownFile], snapshots: &Snapshots) -> Vec<String> {
    let mut out = Vec::new();
    for file in files {
        for (line, path) in named_paths(&file.text) {
            if let Some(why) = snapshots.unresolved(&path) {
                out.push(format!("{}:{line}: {why}", file.path));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOOL: &str = "\
enum call::PolicyInput< 'a > { Envelope { envelope: & 'a SignedPolicy }, Canary(& 'a CanaryPolicy) }
const mcp::listen::ENVELOPES_PATH: & str
fn sandbox::run_sandbox_call : fn run_sandbox_call < T : PackageTool > (call : SandboxCall < '_ >) -> u8
impl Default for ServerLimits
impl RuntimeContext : fn from_env () -> Self
impl< T : PackageTool > Sandbox < T > : fn readiness (& self) -> Result < () , RuntimeFailure >
mod mcp
struct mcp::limits::ServerLimits { pub max_connections: usize, .. }
struct runtime_context::RuntimeContext { .. }
struct sandbox::Sandbox< T : PackageTool > { .. }
use call :: PolicyInput in self
use limits :: ServerLimits in mcp::self
use listen :: { ENVELOPES_PATH , MCP_FLAG as FLAG } in mcp::self
use runtime_context :: RuntimeContext in self
use sandbox :: { Sandbox , run_sandbox_call , } in self
use evidence_policy :: lock :: * in self
";
    const POLICY: &str = "\
fn lock::discovery::lock_discovery : fn lock_discovery () -> u8
mod lock
use discovery :: { lock_discovery } in lock::self
";

    fn snapshots() -> Snapshots {
        Snapshots::from_texts([
            ("evidence_tool".to_owned(), TOOL.to_owned()),
            ("evidence_policy".to_owned(), POLICY.to_owned()),
        ])
    }

    #[test]
    fn paths_resolve_through_public_modules_re_exports_and_members() {
        let s = snapshots();
        for ok in [
            "evidence_tool::RuntimeContext",
            "evidence_tool::RuntimeContext::from_env",
            "evidence_tool::run_sandbox_call",
            "evidence_tool::Sandbox::readiness",
            "evidence_tool::mcp",
            "evidence_tool::mcp::ENVELOPES_PATH",
            "evidence_tool::mcp::FLAG",
            "evidence_tool::mcp::ServerLimits::default",
            "evidence_tool::mcp::ServerLimits::max_connections",
            "evidence_tool::PolicyInput::Canary",
            "evidence_tool::lock_discovery",
            "evidence_tool::internal::anything",
            "evidence_policy::lock::lock_discovery",
            "evidence_test_support::model",
        ] {
            assert_eq!(s.unresolved(ok), None, "{ok}");
        }
        for bad in [
            "evidence_tool::ENVELOPES_PATH",
            "evidence_tool::mcp::listen::ENVELOPES_PATH",
            "evidence_tool::mcp::MCP_FLAG",
            "evidence_tool::RuntimeContext::new",
            "evidence_tool::PolicyInput::File",
            "evidence_tool::mcp::ServerLimits::secret",
            "evidence_policy::lock_discovery",
            "evidence_policy::lock::discovery::lock_discovery",
        ] {
            assert!(s.unresolved(bad).is_some(), "{bad} resolves");
        }
    }

    #[test]
    fn paths_are_found_in_prose_code_and_brace_groups() {
        let text = "See `evidence_tool::mcp::ENVELOPES_PATH` and\n\
                    use evidence_tool::{RuntimeContext, Sandbox as S};\n\
                    not my_evidence_tool::X, evidence_policy::lock::lock_discovery().";
        assert_eq!(
            named_paths(text),
            [
                (1, "evidence_tool::mcp::ENVELOPES_PATH".to_owned()),
                (2, "evidence_tool::RuntimeContext".to_owned()),
                (2, "evidence_tool::Sandbox".to_owned()),
                (3, "evidence_policy::lock::lock_discovery".to_owned()),
            ]
        );
    }
}
