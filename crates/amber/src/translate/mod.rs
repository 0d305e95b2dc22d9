//! Address translation: swizzling pages at fault time and unswizzling them
//! at commit, and swizzling `Lazy` pointers upon discovery.

pub mod check;
pub(crate) mod lazy;
pub mod swizzle;
