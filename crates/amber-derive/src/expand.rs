//! The expansion of `#[derive(Persistent)]`.

use crate::attrs;
use crate::types;
use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{ToTokens, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Error, Fields, GenericParam, Ident, Index, Member, Type};

/// One field, as the expansion needs it.
struct Field {
    /// The name stored in the descriptor ("0", "1", … for tuple structs).
    name: String,
    /// How `offset_of!` names it.
    member: Member,
    /// Its type, with `Self` replaced by the struct's name (the layout checks
    /// live outside the impl, where `Self` means nothing).
    ty: Type,
    /// Where to point errors about it.
    span: Span,
    /// What a migration needs: earlier names, default.
    evolution: attrs::FieldOptions,
}

/// Expands the derive, or returns every error found.
pub fn derive(input: &DeriveInput) -> TokenStream {
    match expand(input) {
        Ok(ts) => ts,
        Err(errors) => errors.iter().map(Error::to_compile_error).collect(),
    }
}

fn expand(input: &DeriveInput) -> Result<TokenStream, Vec<Error>> {
    let ident = &input.ident;
    let mut errors = Vec::new();

    let opts = attrs::options(&input.attrs).unwrap_or_else(|e| {
        errors.push(e);
        attrs::Options::default()
    });
    let fields = struct_fields(input, &mut errors);
    if !matches!(input.data, Data::Enum(_) | Data::Union(_)) {
        attrs::check_repr(ident, &input.attrs, &mut errors);
    }
    check_generics(input, &mut errors);
    for f in &fields {
        types::check(&f.ty, &mut errors);
    }
    if !errors.is_empty() {
        return Err(errors);
    }

    let name = match &opts.name {
        Some(lit) => lit.value(),
        None => ident.unraw().to_string(),
    };
    let field_descs = fields.iter().map(|f| {
        let Field {
            name,
            member,
            ty,
            evolution,
            ..
        } = f;
        // The `Field` bound is checked here; point its error at the type.
        let kind = quote_spanned! {ty.span()=> <#ty as ::amber::Field>::KIND };
        let evolution = evolution_tokens(ty, evolution);
        quote! {
            ::amber::desc::FieldDesc {
                name: #name,
                offset: ::core::mem::offset_of!(#ident, #member) as u32,
                kind: &#kind,
                evolution: #evolution,
            }
        }
    });
    let checks = layout_checks(ident, &fields);

    Ok(quote! {
        const _: () = {
            const __AMBER_DESC: ::amber::desc::TypeDesc = ::amber::desc::TypeDesc {
                name: #name,
                size: ::core::mem::size_of::<#ident>() as u32,
                align: ::core::mem::align_of::<#ident>() as u32,
                fields: &[#(#field_descs),*],
            };
            // The trait implementation and its safety argument live in
            // Amber's virtual-memory module; `#checks` below holds up its
            // compile-time half.
            ::amber::__impl_persistent!(#ident, __AMBER_DESC);
            #checks
        };
    })
}

/// A field's `Evolution`: its earlier names and default. A `default =
/// EXPR` becomes the value's little-endian bytes, computed at compile time
/// (`to_le_bytes` is what a primitive field has; other kinds take the zero
/// `default`).
fn evolution_tokens(ty: &Type, e: &attrs::FieldOptions) -> TokenStream {
    let names = &e.renamed_from;
    let default = match &e.default {
        None => quote! { ::amber::desc::FieldDefault::None },
        Some(attrs::FieldDefault::Zero) => quote! { ::amber::desc::FieldDefault::Zero },
        Some(attrs::FieldDefault::Expr(x)) => quote_spanned! {x.span()=>
            ::amber::desc::FieldDefault::Bytes({
                const fn __amber_primitive<T: ::amber::__private::PrimitiveDefault>() {}
                __amber_primitive::<#ty>();
                const __AMBER_DEFAULT: [u8; ::core::mem::size_of::<#ty>()] =
                    <#ty>::to_le_bytes(#x);
                &__AMBER_DEFAULT
            })
        },
    };
    quote! {
        ::amber::desc::Evolution {
            renamed_from: &[#(#names),*],
            default: #default,
        }
    }
}

/// The fields of a struct; an error for enums, unions and field-less structs.
fn struct_fields(input: &DeriveInput, errors: &mut Vec<Error>) -> Vec<Field> {
    let ident = &input.ident;
    let data = match &input.data {
        Data::Struct(s) => s,
        Data::Enum(e) => {
            errors.push(Error::new_spanned(
                e.enum_token,
                "#[derive(Persistent)] does not support enums: a discriminant read from the \
                 database may be invalid, and the variants' layouts differ, so the stored layout \
                 cannot say where the pointers are; use a #[repr(C)] struct with a tag field \
                 (e.g. `kind: u8`) and each variant's data in fields",
            ));
            return Vec::new();
        }
        Data::Union(u) => {
            errors.push(Error::new_spanned(
                u.union_token,
                "#[derive(Persistent)] does not support unions: Amber could not tell which field \
                 holds a pointer to swizzle; use a #[repr(C)] struct with a tag field (e.g. \
                 `kind: u8`) and each case's data in fields",
            ));
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    match &data.fields {
        Fields::Unit => errors.push(Error::new_spanned(
            ident,
            "a unit struct has nothing to store: a persistent type needs at least one field",
        )),
        Fields::Named(named) if named.named.is_empty() => errors.push(Error::new_spanned(
            ident,
            "a struct without fields has nothing to store: a persistent type needs at least one \
             field",
        )),
        Fields::Unnamed(unnamed) if unnamed.unnamed.is_empty() => errors.push(Error::new_spanned(
            ident,
            "a struct without fields has nothing to store: a persistent type needs at least \
                 one field",
        )),
        fields => {
            for (i, f) in fields.iter().enumerate() {
                let evolution = attrs::field_options(&f.attrs, errors);
                let (name, member, span) = match &f.ident {
                    Some(id) => (id.unraw().to_string(), Member::Named(id.clone()), id.span()),
                    None => (
                        i.to_string(),
                        Member::Unnamed(Index {
                            index: i as u32,
                            span: f.ty.span(),
                        }),
                        f.ty.span(),
                    ),
                };
                let ty = replace_self(f.ty.to_token_stream(), ident);
                let ty = syn::parse2::<Type>(ty).unwrap_or_else(|_| f.ty.clone());
                out.push(Field {
                    name,
                    member,
                    ty,
                    span,
                    evolution,
                });
            }
        }
    }
    out
}

fn check_generics(input: &DeriveInput, errors: &mut Vec<Error>) {
    for p in &input.generics.params {
        errors.push(match p {
            GenericParam::Lifetime(l) => Error::new_spanned(
                l,
                "persistent types cannot have lifetime parameters: objects in the database \
                 outlive every Rust borrow; point to other objects with PRef<T>",
            ),
            _ => Error::new_spanned(
                p,
                "persistent types cannot have generic parameters: the stored name must identify \
                 exactly one layout; write one concrete struct per use (and give them distinct \
                 names with #[persistent(name = \"...\")] if needed)",
            ),
        });
    }
}

/// `Self` in a field type means the struct; the checks outside the impl need
/// it spelled out.
fn replace_self(ts: TokenStream, ident: &Ident) -> TokenStream {
    ts.into_iter()
        .map(|tt| match tt {
            TokenTree::Ident(id) if id == "Self" => {
                let mut to = ident.clone();
                to.set_span(id.span());
                TokenTree::Ident(to)
            }
            TokenTree::Group(g) => {
                let mut ng = Group::new(g.delimiter(), replace_self(g.stream(), ident));
                ng.set_span(g.span());
                TokenTree::Group(ng)
            }
            tt => tt,
        })
        .collect()
}

/// Placeholders in the padding messages, replaced when the constant is
/// evaluated: by the number of padding bytes, and by the field's name.
const GAP: char = '@';
const FIELD: char = '$';

/// A constant that fails to evaluate, with a message naming the struct (and
/// the field after the padding), if the struct has padding, drop glue, an
/// alignment above 8 or a size above 4 GiB; then `check_layout`, the
/// library's own statement of the same rules, which the derive's checks
/// come before so that the error names the type.
fn layout_checks(ident: &Ident, fields: &[Field]) -> TokenStream {
    let between = format!(
        "`{ident}` has padding before field `{FIELD}`: the compiler inserts {GAP} unused \
         byte(s) there to align the field, and padding bytes are uninitialised, so they cannot \
         be written to the database. Add a field `_pad: [u8; {GAP}]` before `{FIELD}`, or order \
         the fields from largest to smallest alignment"
    );
    let trailing = format!(
        "`{ident}` has padding after its last field `{FIELD}`: its size is rounded up to its \
         alignment with {GAP} unused byte(s), and padding bytes are uninitialised, so they \
         cannot be written to the database. Add a field `_pad: [u8; {GAP}]` after `{FIELD}`"
    );
    // Only declared where used: an unused constant would warn in the
    // user's crate.
    let between_const = (fields.len() > 1).then(|| quote! { const BETWEEN: &str = #between; });
    let mut checks = Vec::new();
    for pair in fields.windows(2) {
        let [prev, f] = pair else { continue };
        let (pm, pt, m, name) = (&prev.member, &prev.ty, &f.member, &f.name);
        checks.push(quote_spanned! {f.span=> {
            let end = ::core::mem::offset_of!(#ident, #pm) + ::core::mem::size_of::<#pt>();
            let at = ::core::mem::offset_of!(#ident, #m);
            if at != end {
                padding(BETWEEN, #name, at.saturating_sub(end));
            }
        }});
    }
    if let Some(last) = fields.last() {
        let (m, t, name) = (&last.member, &last.ty, &last.name);
        checks.push(quote_spanned! {ident.span()=> {
            let end = ::core::mem::offset_of!(#ident, #m) + ::core::mem::size_of::<#t>();
            let size = ::core::mem::size_of::<#ident>();
            if size != end {
                padding(TRAILING, #name, size.saturating_sub(end));
            }
        }});
    }
    let drop_msg = format!(
        "`{ident}` implements Drop (or has a field that does): objects in the database are \
         bytes that Amber copies and never drops, so drop code would run on a copy or not at \
         all; remove the Drop impl"
    );
    let align_msg = format!(
        "`{ident}` is aligned to more than 8 bytes, the alignment of objects in the database; \
         persistent types must have alignment 8 or less"
    );
    let size_msg = format!("`{ident}` is too large for a persistent object: at most 4 GiB");
    let sizes = fields.iter().map(|f| {
        let t = &f.ty;
        quote! { ::core::mem::size_of::<#t>() }
    });
    let (gap, field) = (
        syn::LitByte::new(GAP as u8, Span::call_site()),
        syn::LitByte::new(FIELD as u8, Span::call_site()),
    );
    // Errors point at the struct (or field); the rest has the derive's own
    // span, so that lints the user's crate enables do not look into it.
    let type_checks = quote_spanned! {ident.span()=>
        if ::core::mem::needs_drop::<#ident>() {
            ::core::panic!("{}", #drop_msg);
        }
        if ::core::mem::align_of::<#ident>() > 8 {
            ::core::panic!("{}", #align_msg);
        }
        if ::core::mem::size_of::<#ident>() > u32::MAX as usize {
            ::core::panic!("{}", #size_msg);
        }
        ::amber::__private::check_layout::<#ident>(#(#sizes)+*);
    };
    quote! {
        const _: () = {
            #between_const
            const TRAILING: &str = #trailing;
            /// Panics with `template`, its placeholders replaced by `field`
            /// and `gap`.
            const fn padding(template: &str, field: &str, gap: usize) -> ! {
                const fn put(buf: &mut [u8; 1024], len: &mut usize, b: u8) {
                    if *len < buf.len() {
                        buf[*len] = b;
                        *len += 1;
                    }
                }
                let (t, f) = (template.as_bytes(), field.as_bytes());
                let mut buf = [0u8; 1024];
                let mut len = 0;
                let mut i = 0;
                while i < t.len() {
                    if t[i] == #field {
                        let mut j = 0;
                        while j < f.len() {
                            put(&mut buf, &mut len, f[j]);
                            j += 1;
                        }
                    } else if t[i] == #gap {
                        put(&mut buf, &mut len, if gap < 10 { b"0123456789"[gap] } else { b'?' });
                    } else {
                        put(&mut buf, &mut len, t[i]);
                    }
                    i += 1;
                }
                match ::core::str::from_utf8(buf.split_at(len).0) {
                    ::core::result::Result::Ok(s) => ::core::panic!("{}", s),
                    ::core::result::Result::Err(_) => ::core::panic!("{}", template),
                }
            }
            #(#checks)*
            #type_checks
        };
    }
}
