//! Field types that can never be persistent, recognised by their spelling so
//! that the error says what to use instead. Types not recognised here are
//! left to the `Field` trait bound, whose `on_unimplemented` message lists
//! what is allowed.

use syn::{Error, GenericArgument, PathArguments, Type, TypePath};

const NOT_HERE: &str = "it is an address in this process, meaningless in the database file \
                        and in the next run";

/// Checks a field type; pushes an error per problem found.
pub fn check(ty: &Type, errors: &mut Vec<Error>) {
    match ty {
        Type::Paren(p) => check(&p.elem, errors),
        Type::Group(g) => check(&g.elem, errors),
        Type::Array(a) => check(&a.elem, errors),
        Type::Reference(r) => errors.push(Error::new_spanned(
            r,
            format!(
                "a reference cannot be stored in a persistent object: {NOT_HERE}; use PRef<T> \
                 (or Option<PRef<T>> for a nullable one) to point to another persistent object"
            ),
        )),
        Type::Ptr(p) => errors.push(Error::new_spanned(
            p,
            format!(
                "a raw pointer cannot be stored in a persistent object: {NOT_HERE}; use PRef<T> \
                 (or Option<PRef<T>> for a nullable one) to point to another persistent object"
            ),
        )),
        Type::Slice(s) => errors.push(Error::new_spanned(
            s,
            "a slice cannot be a persistent field: it has no fixed size; use an array [T; N] \
             for a fixed length, or PVec<T> for a growable one",
        )),
        Type::Tuple(t) if t.elems.is_empty() => errors.push(Error::new_spanned(
            t,
            "`()` cannot be a persistent field: it has nothing to store; remove the field",
        )),
        Type::Tuple(t) => errors.push(Error::new_spanned(
            t,
            "a tuple cannot be a persistent field: Rust does not guarantee a tuple's layout, \
             and the layout is stored in the database; use an array [T; N], or a \
             #[derive(Persistent)] #[repr(C)] struct",
        )),
        Type::BareFn(f) => errors.push(Error::new_spanned(
            f,
            format!(
                "a function pointer cannot be stored in a persistent object: {NOT_HERE}; store \
                 a tag (e.g. `kind: u8`) and choose the function from it"
            ),
        )),
        Type::TraitObject(t) => errors.push(Error::new_spanned(
            t,
            "a trait object cannot be a persistent field: it has no fixed size and its vtable \
             is an address in this process; store a tag (e.g. `kind: u8`) and a PRef to a \
             concrete persistent type",
        )),
        Type::ImplTrait(t) => errors.push(Error::new_spanned(
            t,
            "`impl Trait` cannot be a persistent field: the stored layout must name one \
             concrete type",
        )),
        Type::Never(n) => errors.push(Error::new_spanned(
            n,
            "`!` cannot be a persistent field: it has no values to store",
        )),
        Type::Infer(i) => errors.push(Error::new_spanned(
            i,
            "a persistent field needs a written type",
        )),
        Type::Path(p) => check_path(p, errors),
        // Macros and anything else: left to the `Field` bound.
        _ => {}
    }
}

fn last_ident(p: &TypePath) -> Option<(String, &PathArguments)> {
    if p.qself.is_some() {
        return None;
    }
    let seg = p.path.segments.last()?;
    Some((seg.ident.to_string(), &seg.arguments))
}

/// The type arguments of `Name<A, B>`.
fn type_args(args: &PathArguments) -> Vec<&Type> {
    match args {
        PathArguments::AngleBracketed(a) => a
            .args
            .iter()
            .filter_map(|g| match g {
                GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn strip(ty: &Type) -> &Type {
    match ty {
        Type::Paren(p) => strip(&p.elem),
        Type::Group(g) => strip(&g.elem),
        t => t,
    }
}

/// The last identifier of a plain path type.
fn path_name(ty: &Type) -> Option<String> {
    match strip(ty) {
        Type::Path(p) => last_ident(p).map(|(n, _)| n),
        _ => None,
    }
}

const PRIMS: &[&str] = &[
    "u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64", "f32", "f64",
];

/// Standard types that take type parameters: their names are only taken
/// for the standard type when written with `<..>`, so that a persistent
/// struct the program calls `Cell` or `Weak` is not refused.
const GENERIC_STD: &[&str] = &[
    "Box",
    "Rc",
    "Arc",
    "Weak",
    "NonNull",
    "Vec",
    "VecDeque",
    "LinkedList",
    "BinaryHeap",
    "HashMap",
    "BTreeMap",
    "HashSet",
    "BTreeSet",
    "IndexMap",
    "IndexSet",
    "Cell",
    "RefCell",
    "UnsafeCell",
    "OnceCell",
    "LazyCell",
    "Mutex",
    "RwLock",
    "OnceLock",
    "LazyLock",
    "PhantomData",
    "NonZero",
    "AtomicPtr",
];

const ATOMICS: &[&str] = &[
    "AtomicBool",
    "AtomicU8",
    "AtomicI8",
    "AtomicU16",
    "AtomicI16",
    "AtomicU32",
    "AtomicI32",
    "AtomicU64",
    "AtomicI64",
    "AtomicUsize",
    "AtomicIsize",
    "AtomicPtr",
];

const NON_ZEROS: &[&str] = &[
    "NonZero",
    "NonZeroU8",
    "NonZeroI8",
    "NonZeroU16",
    "NonZeroI16",
    "NonZeroU32",
    "NonZeroI32",
    "NonZeroU64",
    "NonZeroI64",
    "NonZeroU128",
    "NonZeroI128",
    "NonZeroUsize",
    "NonZeroIsize",
];

/// Advice for a path type that can never be a persistent field.
fn path_advice(p: &TypePath) -> Option<String> {
    let (name, args) = last_ident(p)?;
    let generic = matches!(args, PathArguments::AngleBracketed(_));
    if GENERIC_STD.contains(&name.as_str()) && !generic {
        return None;
    }
    advice(&name)
}

/// Advice for a type name that can never be a persistent field.
fn advice(name: &str) -> Option<String> {
    let owned = |what: &str, instead: &str| {
        format!(
            "`{name}` cannot be stored in a persistent object: it owns memory of this process's \
             heap, which is not in the database and is gone in the next run; {what}{instead}"
        )
    };
    Some(match name {
        "Box" | "Rc" | "Arc" | "Weak" | "NonNull" => format!(
            "`{name}` cannot be stored in a persistent object: {NOT_HERE}; use PRef<T> (or \
             Option<PRef<T>> for a nullable one) to point to another persistent object"
        ),
        "Vec" | "VecDeque" | "LinkedList" | "BinaryHeap" => owned(
            "use ",
            "PVec<T>, a growable array whose buffer is an object in the database",
        ),
        "String" | "str" | "OsString" | "CString" | "PathBuf" => owned(
            "use ",
            "PString, a growable UTF-8 string whose buffer is an object in the database \
                 (PBytes for bytes)",
        ),
        "HashMap" | "BTreeMap" | "HashSet" | "BTreeSet" | "IndexMap" | "IndexSet" => owned(
            "use ",
            "PIndex<V, K>, an ordered map from keys K (integers, strings, byte strings, tuples: \
             any amber::IndexKey) to PRef<V> kept in the database, or PMultiIndex<V, K> for \
             several values per key",
        ),
        "bool" => "`bool` cannot be a persistent field: a byte read from the database may hold \
                   a value other than 0 or 1, and such a bool is undefined behaviour; use u8 \
                   (0 = false, 1 = true)"
            .to_string(),
        "char" => "`char` cannot be a persistent field: not every u32 read from the database is \
                   a valid char, and an invalid one is undefined behaviour; use u32 and convert \
                   with char::from_u32"
            .to_string(),
        "usize" | "isize" => {
            let instead = if name == "usize" { "u64" } else { "i64" };
            format!(
                "`{name}` cannot be a persistent field: its size differs between platforms, and \
                 the stored layout must be the same in every build; use {instead}"
            )
        }
        "u128" | "i128" => {
            let instead = if name == "u128" {
                "[u64; 2]"
            } else {
                "[i64; 2]"
            };
            format!(
                "`{name}` cannot be a persistent field: its alignment (16) is larger than the 8 \
                 bytes objects are aligned to in the database; use {instead}"
            )
        }
        "Cell" | "RefCell" | "UnsafeCell" | "OnceCell" | "LazyCell" | "Mutex" | "RwLock"
        | "OnceLock" | "LazyLock" => format!(
            "`{name}` cannot be a persistent field: persistent objects are changed through `&mut` \
             borrowed from the database, which tracks and logs the writes, and borrow or lock \
             state would mean nothing in the file; store the plain value"
        ),
        n if ATOMICS.contains(&n) => format!(
            "`{name}` cannot be a persistent field: persistent objects are changed through `&mut` \
             borrowed from the database, which tracks and logs the writes; store the plain \
             integer (e.g. u64 instead of AtomicU64)"
        ),
        "PhantomData" | "PhantomPinned" => format!(
            "`{name}` cannot be a persistent field: it has nothing to store, and persistent \
             types cannot be generic; remove the field"
        ),
        n if NON_ZEROS.contains(&n) => format!(
            "`{name}` cannot be a persistent field: the bytes read from the database are not \
             known to be non-zero; use the plain integer type and check for zero where you \
             read it"
        ),
        _ => return None,
    })
}

fn check_path(p: &TypePath, errors: &mut Vec<Error>) {
    let Some((name, args)) = last_ident(p) else {
        return;
    };
    if let Some(msg) = path_advice(p) {
        errors.push(Error::new_spanned(p, msg));
        return;
    }
    match name.as_str() {
        "Option" => {
            let inner = type_args(args);
            let inner_name = inner.first().and_then(|t| path_name(t));
            let pointer = inner_name
                .as_deref()
                .is_some_and(|n| n == "PRef" || n == "Smart");
            // `Option<Box<T>>` and the like: the advice about the inner type
            // is the useful one.
            let known_bad = inner.first().is_some_and(|t| match strip(t) {
                Type::Path(p) => path_advice(p).is_some(),
                Type::Reference(_) | Type::Ptr(_) | Type::BareFn(_) => true,
                _ => false,
            });
            if pointer || known_bad {
                if let Some(t) = inner.first() {
                    check(t, errors);
                }
            } else {
                errors.push(Error::new_spanned(
                    p,
                    "`Option` is allowed in a persistent object only as Option<PRef<T>> or \
                     Option<Smart<T>>, where None is the null pointer (0); other types have no \
                     spare bit pattern for None that every build agrees on (Lazy<T> needs none: \
                     it may be null itself, Lazy::null()). For an optional \
                     value, store a flag next to it (e.g. `has_x: u8`); if the inner type is an \
                     alias of PRef<T>, write Option<PRef<T>> out",
                ));
            }
        }
        "PRef" | "Smart" | "Lazy" => {
            for t in type_args(args) {
                check_target(&name, t, errors);
            }
        }
        // The value type is a target; the key type is any `IndexKey`.
        "PIndex" | "PMultiIndex" => {
            if let Some(t) = type_args(args).first() {
                check_target(&name, t, errors);
            }
        }
        "PVec" => {
            for t in type_args(args) {
                check(t, errors);
            }
        }
        _ => {}
    }
}

/// The target of a pointer must be a persistent struct.
fn check_target(pointer: &str, ty: &Type, errors: &mut Vec<Error>) {
    let t = strip(ty);
    let not_struct = match t {
        Type::Array(_) | Type::Slice(_) | Type::Tuple(_) => true,
        Type::Path(p) => last_ident(p).is_some_and(|(n, _)| PRIMS.contains(&n.as_str())),
        _ => false,
    };
    if not_struct {
        errors.push(Error::new_spanned(
            ty,
            format!(
                "{what} must be a #[derive(Persistent)] struct (an object type with a stored \
                 layout); wrap the value in one, or use PVec<T> for a growable array of values",
                what = if pointer == "PIndex" || pointer == "PMultiIndex" {
                    format!("the value type of {pointer}<V>")
                } else {
                    format!("the target of {pointer}<T>")
                }
            ),
        ));
    } else {
        check(ty, errors);
    }
}
