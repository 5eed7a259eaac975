//! The public API of each library crate, as declared in its sources, compared with the
//! committed snapshot in `api/<crate>.txt`, so that a change of the public surface is
//! deliberate: it shows up in review as a change of that file. The surface is every
//! `pub` item of every module that is not test-only or `#[doc(hidden)]` (with its
//! signature: functions without bodies, structs with their public fields, enums with
//! their variants, traits with their items, `#[non_exhaustive]` kept), every public
//! re-export, every public method of an `impl` block and every trait implemented for a
//! public type. Regenerate with `UPDATE_API=1 cargo test --test public_api`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use quote::ToTokens;
use syn::{Attribute, Fields, ImplItem, Item, TraitItem, Visibility};

const CRATES: [&str; 7] = [
    "result",
    "policy",
    "package",
    "connectors",
    "materialize",
    "tool",
    "opencode-workspace",
];

fn hidden_or_test(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| {
        let text = a.to_token_stream().to_string();
        text.contains("doc (hidden)") || text.contains("cfg (test)")
    })
}

fn non_exhaustive(attrs: &[Attribute]) -> &'static str {
    if attrs.iter().any(|a| a.path().is_ident("non_exhaustive")) {
        "#[non_exhaustive] "
    } else {
        ""
    }
}

fn public(vis: &Visibility) -> bool {
    matches!(vis, Visibility::Public(_))
}

fn tokens(t: &impl ToTokens) -> String {
    t.to_token_stream().to_string()
}

/// The public surface of one crate.
#[derive(Default)]
struct Surface {
    lines: Vec<String>,
    impls: Vec<(String, String)>,
    types: BTreeSet<String>,
}

impl Surface {
    fn module(&mut self, path: &str, file: &Path, items: &[Item]) {
        for item in items {
            self.item(path, file, item);
        }
    }

    fn item(&mut self, path: &str, file: &Path, item: &Item) {
        let at = |name: &dyn std::fmt::Display| {
            if path.is_empty() {
                name.to_string()
            } else {
                format!("{path}::{name}")
            }
        };
        match item {
            Item::Mod(m) if !hidden_or_test(&m.attrs) => {
                let name = m.ident.to_string();
                let inner = at(&name);
                if public(&m.vis) {
                    self.lines.push(format!("mod {inner}"));
                }
                match &m.content {
                    Some((_, items)) => self.module(&inner, file, items),
                    None => {
                        let dir = module_dir(file);
                        let candidates = [
                            dir.join(format!("{name}.rs")),
                            dir.join(&name).join("mod.rs"),
                        ];
                        let found = candidates.iter().find(|p| p.is_file()).unwrap_or_else(|| {
                            panic!("module {inner} of {} has no file", file.display())
                        });
                        let parsed = syn::parse_file(&std::fs::read_to_string(found).unwrap())
                            .unwrap_or_else(|e| panic!("{}: {e}", found.display()));
                        self.module(&inner, found, &parsed.items);
                    }
                }
            }
            Item::Use(u) if public(&u.vis) && !hidden_or_test(&u.attrs) => {
                self.lines
                    .push(format!("use {} in {}", tokens(&u.tree), at(&"self")));
            }
            Item::Fn(f) if public(&f.vis) && !hidden_or_test(&f.attrs) => {
                self.lines
                    .push(format!("fn {} : {}", at(&f.sig.ident), tokens(&f.sig)));
            }
            Item::Struct(s) if public(&s.vis) && !hidden_or_test(&s.attrs) => {
                self.types.insert(s.ident.to_string());
                let fields: Vec<String> = match &s.fields {
                    Fields::Named(named) => named
                        .named
                        .iter()
                        .map(|f| match (&f.ident, public(&f.vis)) {
                            (Some(name), true) => format!("pub {name}: {}", tokens(&f.ty)),
                            _ => "..".to_owned(),
                        })
                        .collect(),
                    Fields::Unnamed(unnamed) => unnamed
                        .unnamed
                        .iter()
                        .map(|f| {
                            if public(&f.vis) {
                                format!("pub {}", tokens(&f.ty))
                            } else {
                                "..".to_owned()
                            }
                        })
                        .collect(),
                    Fields::Unit => Vec::new(),
                };
                let mut fields = fields;
                fields.dedup();
                self.lines.push(format!(
                    "{}struct {}{} {{ {} }}",
                    non_exhaustive(&s.attrs),
                    at(&s.ident),
                    tokens(&s.generics),
                    fields.join(", ")
                ));
            }
            Item::Enum(e) if public(&e.vis) && !hidden_or_test(&e.attrs) => {
                self.types.insert(e.ident.to_string());
                let variants: Vec<String> = e
                    .variants
                    .iter()
                    .map(|v| format!("{}{}", v.ident, fields_of(&v.fields)))
                    .collect();
                self.lines.push(format!(
                    "{}enum {}{} {{ {} }}",
                    non_exhaustive(&e.attrs),
                    at(&e.ident),
                    tokens(&e.generics),
                    variants.join(", ")
                ));
            }
            Item::Trait(t) if public(&t.vis) && !hidden_or_test(&t.attrs) => {
                self.types.insert(t.ident.to_string());
                let members: Vec<String> = t
                    .items
                    .iter()
                    .map(|i| match i {
                        TraitItem::Fn(f) => tokens(&f.sig),
                        TraitItem::Const(c) => format!("const {}: {}", c.ident, tokens(&c.ty)),
                        TraitItem::Type(ty) => format!("type {}{}", ty.ident, tokens(&ty.bounds)),
                        other => tokens(other),
                    })
                    .collect();
                self.lines.push(format!(
                    "trait {}{} : {} {{ {} }}",
                    at(&t.ident),
                    tokens(&t.generics),
                    tokens(&t.supertraits),
                    members.join("; ")
                ));
            }
            Item::Const(c) if public(&c.vis) && !hidden_or_test(&c.attrs) => {
                self.lines
                    .push(format!("const {}: {}", at(&c.ident), tokens(&c.ty)));
            }
            Item::Static(s) if public(&s.vis) && !hidden_or_test(&s.attrs) => {
                self.lines
                    .push(format!("static {}: {}", at(&s.ident), tokens(&s.ty)));
            }
            Item::Type(t) if public(&t.vis) && !hidden_or_test(&t.attrs) => {
                self.types.insert(t.ident.to_string());
                self.lines.push(format!(
                    "type {}{} = {}",
                    at(&t.ident),
                    tokens(&t.generics),
                    tokens(&t.ty)
                ));
            }
            Item::Macro(m)
                if m.attrs.iter().any(|a| a.path().is_ident("macro_export"))
                    && !hidden_or_test(&m.attrs) =>
            {
                if let Some(name) = &m.ident {
                    self.lines.push(format!("macro {name}!"));
                }
            }
            Item::Impl(i) if !hidden_or_test(&i.attrs) => {
                let self_ty = tokens(&i.self_ty);
                let head = match &i.trait_ {
                    Some((bang, path, _)) => format!(
                        "impl{} {}{} for {self_ty}",
                        tokens(&i.generics),
                        if bang.is_some() { "!" } else { "" },
                        tokens(path)
                    ),
                    None => format!("impl{} {self_ty}", tokens(&i.generics)),
                };
                if i.trait_.is_some() {
                    self.impls.push((self_ty, head));
                } else {
                    for member in &i.items {
                        if let ImplItem::Fn(f) = member
                            && public(&f.vis)
                            && !hidden_or_test(&f.attrs)
                        {
                            self.impls
                                .push((self_ty.clone(), format!("{head} : {}", tokens(&f.sig))));
                        }
                        if let ImplItem::Const(c) = member
                            && public(&c.vis)
                        {
                            self.impls.push((
                                self_ty.clone(),
                                format!("{head} : const {}: {}", c.ident, tokens(&c.ty)),
                            ));
                        }
                    }
                }
            }
            _ => {}
        }
    }

    fn render(mut self) -> String {
        let types = self.types.clone();
        let type_name = |ty: &str| ty.split(['<', ' ']).next().unwrap_or_default().to_owned();
        for (ty, line) in self.impls.drain(..) {
            if types.contains(&type_name(&ty)) {
                self.lines.push(line);
            }
        }
        let mut lines = self.lines;
        lines.sort();
        lines.dedup();
        lines.join("\n") + "\n"
    }
}

/// Fields as types (and names), without their attributes (documentation is not API).
fn fields_of(fields: &Fields) -> String {
    match fields {
        Fields::Named(named) => {
            let all: Vec<String> = named
                .named
                .iter()
                .map(|f| format!("{}: {}", tokens(&f.ident), tokens(&f.ty)))
                .collect();
            format!(" {{ {} }}", all.join(", "))
        }
        Fields::Unnamed(unnamed) => {
            let all: Vec<String> = unnamed.unnamed.iter().map(|f| tokens(&f.ty)).collect();
            format!("({})", all.join(", "))
        }
        Fields::Unit => String::new(),
    }
}

/// The folder a module file's children live in: `src/` for `lib.rs` and `mod.rs`,
/// `src/name/` for `src/name.rs`.
fn module_dir(file: &Path) -> PathBuf {
    let parent = file.parent().unwrap().to_owned();
    match file.file_name().and_then(|n| n.to_str()) {
        Some("lib.rs" | "mod.rs") => parent,
        _ => parent.join(file.file_stem().unwrap()),
    }
}

fn surface_of(krate: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates")
        .join(krate);
    let lib = root.join("src/lib.rs");
    let parsed = syn::parse_file(&std::fs::read_to_string(&lib).unwrap()).unwrap();
    let mut surface = Surface::default();
    surface.module("", &lib, &parsed.items);
    surface.render()
}

#[test]
fn each_crate_s_public_api_is_the_committed_snapshot() {
    let update = std::env::var_os("UPDATE_API").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for krate in CRATES {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("api")
            .join(format!("{krate}.txt"));
        let actual = surface_of(krate);
        if update {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &actual).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        if committed != actual {
            stale.push(krate);
        }
    }
    assert!(
        stale.is_empty(),
        "the public API of {stale:?} differs from api/<crate>.txt; if the change is \
         deliberate, run `UPDATE_API=1 cargo test --test public_api` and commit the files"
    );
}

#[test]
fn the_snapshot_sees_a_changed_signature() {
    // The surface depends on a signature, a re-export and a field's visibility.
    let one = |src: &str| {
        let parsed = syn::parse_file(src).unwrap();
        let mut surface = Surface::default();
        surface.module("", Path::new("src/lib.rs"), &parsed.items);
        surface.render()
    };
    let base = one("pub struct A { pub x: u8, y: u8 } impl A { pub fn f(&self) -> u8 { 1 } }");
    assert_ne!(
        base,
        one("pub struct A { pub x: u8, y: u8 } impl A { pub fn f(&self) -> u16 { 1 } }")
    );
    assert_ne!(
        base,
        one("pub struct A { pub x: u8, pub y: u8 } impl A { pub fn f(&self) -> u8 { 1 } }")
    );
    assert_ne!(
        base,
        one(
            "pub struct A { pub x: u8, y: u8 } impl A { pub fn f(&self) -> u8 { 1 } } pub use A as B;"
        )
    );
    assert_eq!(
        base,
        one("pub struct A { pub x: u8, y: u8 } impl A { pub fn f(&self) -> u8 { 2 } fn g() {} }")
    );
}
