//! The collector's knowledge of `PIndex` nodes: which words of a node are
//! references (an inner node's children, a leaf's values), and how a
//! relocated node's references are rewritten. The node format is
//! `db/index/node.rs`'s, which says where the addresses lie
//! ([`address_offsets`]); this is the one place of the collector that uses
//! it.

use crate::db::index::node::{address_offsets, gap};
use crate::format::bytes::{get_u64, put_u64};

/// What a reference word of a node points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NodeRef {
    /// Another node of the same index (a child).
    Node,
    /// A value: an object of the index's value type.
    Value,
}

/// The non-null reference words of the node whose body is `b`: the byte
/// offset of each, and what it points at. A node whose header is not
/// sound is refused (deep verification has passed it before).
pub(super) fn refs(b: &[u8]) -> Result<Vec<(usize, NodeRef)>, String> {
    let (h, at) = address_offsets(b).map_err(|e| format!("an index node: {e}"))?;
    let kind = if h.leaf {
        NodeRef::Value
    } else {
        NodeRef::Node
    };
    Ok(at
        .into_iter()
        .filter(|&a| get_u64(b, a).is_some_and(|v| v != 0))
        .map(|a| (a, kind))
        .collect())
}

/// Rewrites the references of a relocated node (its body `b`, a copy of
/// the old one) through `forward`, and zeroes the gap between its slots
/// and its keys: what removals left there may be addresses of the old
/// file, which no reader follows but which would name whatever the
/// compacted file holds there now.
pub(super) fn relocate(
    b: &mut [u8],
    mut forward: impl FnMut(u64) -> Result<u64, String>,
) -> Result<(), String> {
    for (at, _) in refs(b)? {
        let old = get_u64(b, at).unwrap_or(0);
        put_u64(b, at, forward(old)?);
    }
    let (h, _) = address_offsets(b).map_err(|e| format!("an index node: {e}"))?;
    b[gap(&h)].fill(0);
    Ok(())
}
