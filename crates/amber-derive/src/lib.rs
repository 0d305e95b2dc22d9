//! `#[derive(Persistent)]` for Amber's persistent types.
//!
//! The derive implements `amber::Persistent` (and through Amber's blanket
//! impl, `amber::Field`) for a `#[repr(C)]` struct whose fields are all
//! persistent field types, and checks at compile time everything the traits'
//! safety contract asks for. For
//!
//! ```rust,ignore
//! #[derive(Persistent)]
//! #[repr(C)]
//! struct Node { id: u32, _pad: [u8; 4], next: Option<PRef<Node>> }
//! ```
//!
//! it generates
//!
//! ```rust,ignore
//! const _: () = {
//!     const __AMBER_DESC: ::amber::desc::TypeDesc = ::amber::desc::TypeDesc {
//!         name: "Node",
//!         size: ::core::mem::size_of::<Node>() as u32,
//!         align: ::core::mem::align_of::<Node>() as u32,
//!         fields: &[
//!             ::amber::desc::FieldDesc {
//!                 name: "id",
//!                 offset: ::core::mem::offset_of!(Node, id) as u32,
//!                 kind: &<u32 as ::amber::Field>::KIND,
//!                 evolution: ::amber::desc::Evolution::NONE,
//!             },
//!             // … `_pad` likewise, and `next` with `Self` spelled `Node`:
//!             // kind: &<Option<PRef<Node>> as ::amber::Field>::KIND
//!         ],
//!     };
//!     // Amber's `__impl_persistent!` (in its virtual-memory module) expands
//!     // to the trait implementation with this descriptor.
//!     ::amber::__impl_persistent!(Node, __AMBER_DESC);
//!     const _: () = {
//!         const BETWEEN: &str = "`Node` has padding before field `$`: … `_pad: [u8; @]` …";
//!         const TRAILING: &str = "`Node` has padding after its last field `$`: …";
//!         const fn padding(template: &str, field: &str, gap: usize) -> ! {
//!             // panics with the template, `$` replaced by the field's name
//!             // and `@` by the number of padding bytes
//!         }
//!         // For each field after the first: no padding before it.
//!         let end = ::core::mem::offset_of!(Node, id) + ::core::mem::size_of::<u32>();
//!         let at = ::core::mem::offset_of!(Node, _pad);
//!         if at != end {
//!             padding(BETWEEN, "_pad", at.saturating_sub(end));
//!         }
//!         // … then none after the last field (TRAILING); no drop glue,
//!         // alignment at most 8 and size at most 4 GiB, each with a message
//!         // naming `Node`; and the library's own check of the same rules:
//!         ::amber::__private::check_layout::<Node>(
//!             ::core::mem::size_of::<u32>()
//!                 + ::core::mem::size_of::<[u8; 4]>()
//!                 + ::core::mem::size_of::<Option<PRef<Node>>>(),
//!         );
//!     };
//! };
//! ```
//!
//! The derive writes no trait implementation itself: it comes from Amber's
//! macro, next to the trait's safety contract, and lints in the user's crate
//! do not fire inside another crate's macro, so a crate that forbids the
//! lint against such code can still derive persistent types.
//!
//! # What is refused, and why
//!
//! At expansion, with a message saying why and what to use instead:
//!
//! - a struct that is not `#[repr(C)]`, or is `repr(packed)`, or
//!   `repr(align(n))` with n > 8;
//! - enums, unions, unit structs and structs without fields;
//! - generic parameters and lifetimes (the stored name must identify one
//!   layout);
//! - field types that can never be persistent, recognised by their last path
//!   segment: references, raw pointers, `Box`/`Rc`/`Arc`/`Weak`/`NonNull`
//!   (use `PRef<T>`), `Vec`/`VecDeque` (`PVec<T>`), `String`/`str`/`PathBuf`
//!   (`PString`), `HashMap`/`BTreeMap`/sets (`PIndex<V>`), `bool` (`u8`),
//!   `char` (`u32`), `usize`/`isize` (`u64`/`i64`), `u128`/`i128`
//!   (`[u64; 2]`), `Option<T>` other than `Option<PRef<T>>` and
//!   `Option<Smart<T>>` (no `Option<Lazy<T>>`: a `Lazy<T>` may be null
//!   itself), `Cell`/`RefCell`/`Mutex`/atomics, `PhantomData`,
//!   `NonZero*`, tuples, slices, function pointers, trait objects; a primitive
//!   or array as the target of `PRef`/`Smart`/`Lazy`/`PIndex`.
//!
//! Any other type must implement `amber::Field`; if it does not, the trait's
//! `on_unimplemented` message says what is allowed. Padding (between fields
//! or at the end), a `Drop` impl and alignment above 8 fail a constant
//! evaluated at compile time (also by `cargo check`), whose message names the
//! struct, and for padding the field after it and the number of bytes to add.
//!
//! Recognition is by spelling (the last path segment): a type alias of `Vec`
//! is caught by the trait bound instead, and `Option` of an alias of `PRef`
//! must be written `Option<PRef<T>>`. Names of generic standard types
//! (`Box`, `Vec`, `Cell`, `Weak`, …) are only taken for them when written
//! with type arguments, so a persistent struct called `Cell` is a valid
//! field.
//!
//! # Choices
//!
//! - Tuple structs are accepted; their fields are stored with the names
//!   `"0"`, `"1"`, …, so a tuple struct and a named struct never compare
//!   equal in the catalog.
//! - The stored name is the struct's identifier (without `r#`), or the one
//!   given by `#[persistent(name = "Stable::Name")]`, which lets a Rust type
//!   be renamed or moved without breaking existing databases. Names must be
//!   non-empty and must not start with `[` (reserved for array types).
//! - `Self` may be used in field types (`next: Option<PRef<Self>>`).

mod attrs;
mod expand;
mod types;

use proc_macro::TokenStream;

/// Derives `amber::Persistent` for a `#[repr(C)]` struct of persistent
/// fields. See the crate documentation for what is checked.
#[proc_macro_derive(Persistent, attributes(persistent))]
pub fn derive_persistent(input: TokenStream) -> TokenStream {
    match syn::parse::<syn::DeriveInput>(input) {
        Ok(input) => expand::derive(&input).into(),
        Err(e) => e.to_compile_error().into(),
    }
}
