//! A `PIndex` walked from its root: the node format is `db/index.rs`'s.

use super::{Seg, Walker, Want};
use crate::db::index::{F, KEYS, LEAF, VALS, WORDS};
use crate::format::bytes::get_u64;
use crate::inspect::deep::FindingClass;
use crate::inspect::deep::map::Blocks;
use std::collections::HashSet;

impl<'a> Walker<'a> {
    /// The words of the index node at `paddr`, if it is one.
    fn node(&mut self, paddr: u64, blocks: &mut Blocks<'_>) -> Option<Vec<u64>> {
        let s = self.pointer(paddr, Want::Node)?;
        let (image, off) = self.image_of(s, blocks)?;
        (0..WORDS).map(|i| get_u64(&image, off + i * 8)).collect()
    }

    /// A `PIndex` whose root node is at `root` and which says it holds
    /// `len` entries of values of type `target`: walked from the root.
    pub(super) fn index(&mut self, root: u64, len: u64, target: &'a str, blocks: &mut Blocks<'_>) {
        if root == 0 {
            if len != 0 {
                self.found(
                    FindingClass::Damage,
                    format!("an empty index (no root node) whose len is {len}"),
                );
            }
            return;
        }
        let mut entries = 0u64;
        let mut seen = HashSet::new();
        let mut work = vec![(root, 0u32)];
        let mut whole = true;
        while let Some((at, depth)) = work.pop() {
            let here = self.at(at);
            let problem = if !seen.insert(at) {
                Some(format!(
                    "index node {here} is reached twice (a loop, or a shared node)"
                ))
            } else {
                (depth > 64).then(|| format!("index node {here} is deeper than 64 levels"))
            };
            if let Some(what) = problem {
                self.found(FindingClass::Damage, what);
                whole = false;
                continue;
            }
            let Some(n) = self.node(at, blocks) else {
                whole = false;
                continue;
            };
            let count = (n[0] & !LEAF) as usize;
            let keys = &n[KEYS..KEYS + count.min(F - 1)];
            if count >= F || keys.windows(2).any(|w| w[0] >= w[1]) {
                self.found(
                    FindingClass::Damage,
                    format!("index node {here} holds {count} keys, not fewer than {F} in ascending order"),
                );
                whole = false;
                continue;
            }
            if n[0] & LEAF == 0 {
                for (i, &child) in n[VALS..=VALS + count].iter().enumerate() {
                    if child == 0 {
                        self.found(
                            FindingClass::Damage,
                            format!("index node {here}: child {i} is null"),
                        );
                        whole = false;
                    } else {
                        work.push((child, depth + 1));
                    }
                }
                continue;
            }
            entries += count as u64;
            if n[1] != 0 {
                self.node(n[1], blocks);
            }
            for (i, &key) in keys.iter().enumerate() {
                self.path.push(Seg::Key(key));
                match n[VALS + i] {
                    0 => self.found(FindingClass::Damage, "the value is null".into()),
                    v => {
                        self.pointer(v, Want::Struct(target));
                    }
                }
                self.path.pop();
            }
        }
        if whole && entries != len {
            self.found(
                FindingClass::Damage,
                format!("the index holds {entries} entries, its len says {len}"),
            );
        }
    }
}
