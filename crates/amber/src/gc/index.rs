//! The collector's knowledge of `PIndex` nodes: which words of a node are
//! references (children, the next leaf, values), and how a relocated node's
//! references are rewritten. The node format is `db/index.rs`'s; this is the
//! one place of the collector that knows it, so a change of the format
//! changes this file (and the deep verification's `walk/index.rs`).

use crate::db::index::{F, LEAF, VALS, WORDS};
use crate::format::bytes::{get_u64, put_u64};

/// What a reference word of a node points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NodeRef {
    /// Another node of the same index (a child, or the next leaf).
    Node,
    /// A value: an object of the index's value type.
    Value,
}

/// Word 1: a leaf's next leaf.
const NEXT: usize = 1;

/// The non-null reference words of the node whose body is `b`: the byte
/// offset of each, and what it points at. A node that deep verification
/// passed holds fewer than `F` keys; anything else is refused.
pub(super) fn refs(b: &[u8]) -> Result<Vec<(usize, NodeRef)>, String> {
    let head = get_u64(b, 0).ok_or("an index node shorter than one word")?;
    let count = (head & !LEAF) as usize;
    if count >= F || b.len() < WORDS * 8 {
        return Err(format!(
            "an index node of {} bytes holding {count} keys",
            b.len()
        ));
    }
    let leaf = head & LEAF != 0;
    let mut out = Vec::with_capacity(count + 2);
    let (first, n, kind) = if leaf {
        (VALS, count, NodeRef::Value)
    } else {
        (VALS, count + 1, NodeRef::Node)
    };
    if leaf {
        out.push((NEXT * 8, NodeRef::Node));
    }
    out.extend((first..first + n).map(|w| (w * 8, kind)));
    out.retain(|&(at, _)| get_u64(b, at).is_some_and(|v| v != 0));
    Ok(out)
}

/// Rewrites the references of a relocated node (its body `b`, a copy of
/// the old one) through `forward`, and zeroes the value and child words
/// past the used ones: what splits and removals left there are addresses
/// of the old file, which no reader follows but which would name whatever
/// the compacted file holds there now.
pub(super) fn relocate(
    b: &mut [u8],
    mut forward: impl FnMut(u64) -> Result<u64, String>,
) -> Result<(), String> {
    for (at, _) in refs(b)? {
        let old = get_u64(b, at).unwrap_or(0);
        put_u64(b, at, forward(old)?);
    }
    let head = get_u64(b, 0).unwrap_or(0);
    let count = (head & !LEAF) as usize;
    let used = if head & LEAF != 0 { count } else { count + 1 };
    b[(VALS + used) * 8..WORDS * 8].fill(0);
    Ok(())
}
