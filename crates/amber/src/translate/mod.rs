//! Address translation: swizzling pages at fault time and unswizzling them
//! at commit.

pub mod swizzle;
