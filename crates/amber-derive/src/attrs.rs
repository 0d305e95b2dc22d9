//! The struct's attributes: `#[repr(..)]` and `#[persistent(..)]`.

use syn::{Attribute, Error, LitInt, LitStr, Result};

/// The largest alignment a persistent type may have: object bodies in the
/// database are 8-aligned.
pub const MAX_ALIGN: u64 = 8;

pub const NOT_REPR_C: &str = "persistent types must be #[repr(C)]: their layout is stored in the \
     database and must be the same in every build (Rust's default layout may reorder fields \
     between compiler versions); add #[repr(C)] to the struct";

/// Checks the `#[repr]` attributes: `C` must be there; `packed` and
/// `align(n)` with n > 8 are refused; `transparent` and integer reprs are not
/// `C`. Pushes one error per problem.
pub fn check_repr(ident: &syn::Ident, attrs: &[Attribute], errors: &mut Vec<Error>) {
    let mut has_c = false;
    let mut other: Option<Error> = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("repr")) {
        let parsed = attr.parse_nested_meta(|meta| {
            let path = &meta.path;
            if path.is_ident("C") {
                has_c = true;
            } else if path.is_ident("packed") {
                if meta.input.peek(syn::token::Paren) {
                    let content;
                    syn::parenthesized!(content in meta.input);
                    let _: LitInt = content.parse()?;
                }
                errors.push(Error::new_spanned(
                    path,
                    "#[repr(packed)] is not allowed on a persistent type: packed fields may be \
                     unaligned, and Amber hands out references to fields; keep #[repr(C)] and \
                     make the padding explicit with `_pad: [u8; N]` fields, or reorder the \
                     fields from largest to smallest alignment",
                ));
            } else if path.is_ident("align") {
                let content;
                syn::parenthesized!(content in meta.input);
                let lit: LitInt = content.parse()?;
                let n: u64 = lit.base10_parse()?;
                if n > MAX_ALIGN {
                    errors.push(Error::new_spanned(
                        &lit,
                        format!(
                            "#[repr(align({n}))] is not allowed on a persistent type: objects in \
                             the database are aligned to {MAX_ALIGN} bytes, so a larger alignment \
                             could not be honoured; use align(8) or less"
                        ),
                    ));
                }
            } else if path.is_ident("transparent") {
                other = Some(Error::new_spanned(
                    path,
                    "#[repr(transparent)] is not accepted on a persistent type: persistent \
                     types must be #[repr(C)], because their layout is stored in the database \
                     and must be the same in every build; write #[repr(C)] instead",
                ));
            } else if path.is_ident("Rust") {
                other = Some(Error::new_spanned(path, NOT_REPR_C));
            }
            // Integer reprs and anything unknown are left to the compiler,
            // which rejects them on structs.
            Ok(())
        });
        if let Err(e) = parsed {
            errors.push(e);
        }
    }
    if let Some(e) = other {
        errors.push(e);
    } else if !has_c {
        errors.push(Error::new_spanned(ident, NOT_REPR_C));
    }
}

/// Options from `#[persistent(..)]` on the struct.
#[derive(Default)]
pub struct Options {
    /// `name = "..."`: the stored name.
    pub name: Option<LitStr>,
}

/// Parses `#[persistent(name = "...")]`.
pub fn options(attrs: &[Attribute]) -> Result<Options> {
    let mut opts = Options::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("persistent")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("name") {
                let lit: LitStr = meta.value()?.parse()?;
                check_name(&lit)?;
                if opts.name.is_some() {
                    return Err(Error::new_spanned(
                        &lit,
                        "the stored name is given twice; keep one `name = \"...\"`",
                    ));
                }
                opts.name = Some(lit);
                Ok(())
            } else {
                Err(meta.error(
                    "unknown #[persistent] option; the only one is `name = \"Stable::Name\"`, \
                     the name stored in the database (default: the struct's identifier)",
                ))
            }
        })?;
    }
    Ok(opts)
}

fn check_name(lit: &LitStr) -> Result<()> {
    let name = lit.value();
    if name.trim().is_empty() {
        return Err(Error::new_spanned(
            lit,
            "the stored name must not be empty: it identifies the type's layout in the database",
        ));
    }
    if name.starts_with('[') {
        return Err(Error::new_spanned(
            lit,
            "stored names starting with `[` are reserved for the array types of PVec and PBytes \
             buffers; choose another name",
        ));
    }
    if name.len() > usize::from(u16::MAX) {
        return Err(Error::new_spanned(
            lit,
            "the stored name is too long: at most 65535 bytes",
        ));
    }
    Ok(())
}

/// Options from `#[persistent(..)]` on a field: what a migration from an
/// older layout needs (`amber::Migration`).
#[derive(Default)]
pub struct FieldOptions {
    /// `renamed_from = "old"` (repeatable): earlier names, in the order
    /// written.
    pub renamed_from: Vec<LitStr>,
    /// `default` (all bytes zero) or `default = EXPR`.
    pub default: Option<FieldDefault>,
}

/// A field's declared default.
pub enum FieldDefault {
    /// `default`: zero, empty, `None`.
    Zero,
    /// `default = EXPR`: a primitive's value.
    Expr(syn::Expr),
}

/// Parses the `#[persistent(..)]` attributes of a field; pushes an error per
/// problem.
pub fn field_options(attrs: &[Attribute], errors: &mut Vec<Error>) -> FieldOptions {
    let mut opts = FieldOptions::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("persistent")) {
        let parsed = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("renamed_from") {
                let lit: LitStr = meta.value()?.parse()?;
                if lit.value().is_empty() {
                    return Err(Error::new_spanned(&lit, "an earlier name cannot be empty"));
                }
                opts.renamed_from.push(lit);
                Ok(())
            } else if meta.path.is_ident("default") {
                if opts.default.is_some() {
                    return Err(meta.error("the default is given twice; keep one"));
                }
                opts.default = Some(if meta.input.peek(syn::Token![=]) {
                    FieldDefault::Expr(meta.value()?.parse()?)
                } else {
                    FieldDefault::Zero
                });
                Ok(())
            } else {
                Err(meta.error(
                    "unknown #[persistent] option on a field; the options are `default` (zero, \
                     empty or None when a migration adds the field), `default = EXPR` (a \
                     primitive field's value when a migration adds it) and `renamed_from = \
                     \"old\"` (the field's name in older layouts); `name = \"...\"` goes on \
                     the struct",
                ))
            }
        });
        if let Err(e) = parsed {
            errors.push(e);
        }
    }
    opts
}
