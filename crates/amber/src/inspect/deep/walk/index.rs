//! A `PIndex` or `PMultiIndex` walked from its root: the node format is
//! `db/index/node.rs`'s, read through its functions. Every node must be a
//! live node object whose header and keys are well formed; keys ascend in
//! each node and lie between the separators above it; leaves are all at
//! one depth, and none below the root is empty (removal frees them); every
//! value points at an object of the index's value type; a multi-index's
//! keys end in sequence numbers below its next one; and the entries number
//! the index's `len`.

use super::{Seg, Walker, Want};
use crate::db::index::node::{self, NODE_BYTES};
use crate::db::index::{BY_VALUE, IndexKey, multi_suffix};
use crate::format::bytes::get_u64;
use crate::inspect::deep::FindingClass;
use crate::inspect::deep::map::Blocks;
use crate::schema::desc::LEGACY_INDEX_KEY;
use std::collections::HashSet;

/// Bytes of a multi-index key's sequence number.
const SEQ: usize = 8;

/// What an index field says about itself.
pub(super) struct IndexField<'a> {
    pub target: &'a str,
    pub key: &'a str,
    pub multi: bool,
}

/// A node to visit: its address, depth, and the bounds its keys must keep
/// (`lo <= key < hi`).
struct Visit {
    at: u64,
    depth: usize,
    lo: Option<Vec<u8>>,
    hi: Option<Vec<u8>>,
}

/// A key as a finding's path shows it: decoded for the common key types,
/// in hex otherwise.
fn show_key(f: &IndexField<'_>, bytes: &[u8]) -> String {
    let (key, seq) = if f.multi && bytes.len() >= SEQ {
        let (k, s) = bytes.split_at(bytes.len() - SEQ);
        (
            k,
            format!(" #{}", u64::from_be_bytes(s.try_into().expect("8 bytes"))),
        )
    } else {
        (bytes, String::new())
    };
    let shown = match (f.key, f.multi) {
        ("u64", false) => u64::decode(key).map(|k| k.to_string()),
        ("u64", true) => u64::decode_nested(key).map(|(k, _)| k.to_string()),
        ("String", false) => String::decode(key).map(|k| format!("{k:?}")),
        ("String", true) => String::decode_nested(key).map(|(k, _)| format!("{k:?}")),
        _ => None,
    };
    let shown = shown.unwrap_or_else(|| key.iter().map(|b| format!("{b:02x}")).collect());
    format!("{shown}{seq}")
}

impl<'a> Walker<'a> {
    /// The bytes of the index node at `paddr`, if it is one.
    fn node(&mut self, paddr: u64, blocks: &mut Blocks<'_>) -> Option<Vec<u8>> {
        let s = self.pointer(paddr, Want::Node)?;
        let (image, off) = self.image_of(s, blocks)?;
        image.get(off..off + NODE_BYTES).map(<[u8]>::to_vec)
    }

    fn damage(&mut self, what: String) {
        self.found(FindingClass::Damage, what);
    }

    /// The index field at `at` in `b`: its header (root, len and, for a
    /// multi-index, the next sequence number), then its tree.
    pub(super) fn index(
        &mut self,
        b: &[u8],
        at: usize,
        f: &IndexField<'a>,
        blocks: &mut Blocks<'_>,
    ) {
        let (Some(root), Some(len)) = (get_u64(b, at), get_u64(b, at + 8)) else {
            return;
        };
        let next = if f.multi { get_u64(b, at + 16) } else { None };
        // Format 2 keeps the value's address between key and sequence
        // number, and says so in the next word's top bit.
        let suffix = next.map_or(SEQ, multi_suffix);
        let next = next.map(|n| n & !BY_VALUE);
        if f.key == LEGACY_INDEX_KEY {
            if root != 0 {
                self.damage(
                    "an index of the first node format (u64 keys in word arrays), which this \
                     version of Amber does not read: rebuild it"
                        .into(),
                );
            }
            return;
        }
        if root == 0 {
            if len != 0 {
                self.damage(format!("an empty index (no root node) whose len is {len}"));
            }
            return;
        }
        let mut entries = 0u64;
        let mut whole = true;
        let mut seen = HashSet::new();
        let mut leaf_depth = None;
        let mut work = vec![Visit {
            at: root,
            depth: 0,
            lo: None,
            hi: None,
        }];
        while let Some(v) = work.pop() {
            let here = self.at(v.at);
            if !seen.insert(v.at) {
                self.damage(format!(
                    "index node {here} is reached twice (a loop, or a shared node)"
                ));
                whole = false;
                continue;
            }
            if v.depth > 64 {
                self.damage(format!("index node {here} is deeper than 64 levels"));
                whole = false;
                continue;
            }
            let Some(n) = self.node(v.at, blocks) else {
                whole = false;
                continue;
            };
            let keys = node::header(&n).and_then(|h| {
                let keys = (0..h.count)
                    .map(|i| node::key(&n, &h, i))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok((h, keys))
            });
            let (h, keys) = match keys {
                Ok(k) => k,
                Err(what) => {
                    self.damage(format!("index node {here}: {what}"));
                    whole = false;
                    continue;
                }
            };
            let ordered = keys.windows(2).all(|w| w[0] < w[1]);
            let bounded = keys
                .first()
                .is_none_or(|k| v.lo.as_deref().is_none_or(|lo| lo <= *k))
                && keys
                    .last()
                    .is_none_or(|k| v.hi.as_deref().is_none_or(|hi| *k < hi));
            if !ordered || !bounded {
                self.damage(format!(
                    "index node {here}: its keys are {}",
                    if ordered {
                        "outside the separators above it"
                    } else {
                        "not in ascending order"
                    }
                ));
                whole = false;
            }
            if !h.leaf {
                for j in 0..=h.count {
                    let child = node::child(&n, &h, j);
                    work.push(Visit {
                        at: child,
                        depth: v.depth + 1,
                        lo: if j == 0 {
                            v.lo.clone()
                        } else {
                            Some(keys[j - 1].to_vec())
                        },
                        hi: if j == h.count {
                            v.hi.clone()
                        } else {
                            Some(keys[j].to_vec())
                        },
                    });
                }
                continue;
            }
            if *leaf_depth.get_or_insert(v.depth) != v.depth {
                self.damage(format!(
                    "index leaf {here} is not at the depth of the others"
                ));
            }
            if h.count == 0 && v.depth > 0 {
                self.damage(format!("index leaf {here} is empty, below the root"));
            }
            entries += h.count as u64;
            for (i, key) in keys.iter().enumerate() {
                self.path.push(Seg::Key(show_key(f, key)));
                let seq = (key.len().checked_sub(suffix)).map(|_| &key[key.len() - SEQ..]);
                match (f.multi, seq, next) {
                    (true, None, _) => {
                        self.damage("a multi-index key without its sequence number".into())
                    }
                    (true, Some(s), Some(next))
                        if u64::from_be_bytes(s.try_into().expect("8 bytes")) >= next =>
                    {
                        self.damage(format!(
                            "the key's sequence number is not below the index's next one, {next}"
                        ));
                    }
                    _ => {}
                }
                match node::value(&n, i) {
                    0 => self.damage("the value is null".into()),
                    val => {
                        self.pointer(val, Want::Struct(f.target));
                    }
                }
                self.path.pop();
            }
        }
        if whole && entries != len {
            self.damage(format!(
                "the index holds {entries} entries, its len says {len}"
            ));
        }
    }
}
