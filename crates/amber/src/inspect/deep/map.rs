//! What the deep verification knows of the whole database: every block with
//! its kind, and every object's start, so that any persistent address can be
//! told apart as the start of an object, a byte inside one, or no object at
//! all; and a small cache of block images for following pointers into other
//! blocks.
//!
//! The starts are one sorted vector of 16 bytes per object (free slots
//! included), built in one pass over the blocks in page order; a lookup is
//! a binary search, which also finds the object an address falls inside.

use crate::error::{Error, Result};
use crate::format::objects::{FLAG_FREE, MAX_TYPE_ID, OBJECT_HEADER, align_up};
use crate::format::page::BlockKind;
use crate::store::Store;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// One object's start: 16 bytes, the cost per object of the map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Start {
    /// Persistent address of its body.
    pub addr: u64,
    /// Type id in bits 0..24, flags in bits 24..32 (as the object header).
    tag: u32,
    /// Body bytes.
    pub size: u32,
}

impl Start {
    pub fn new(addr: u64, type_id: u32, flags: u8, size: u32) -> Start {
        Start {
            addr,
            tag: (type_id & MAX_TYPE_ID) | (u32::from(flags) << 24),
            size,
        }
    }

    pub fn type_id(&self) -> u32 {
        self.tag & MAX_TYPE_ID
    }

    pub fn flags(&self) -> u8 {
        (self.tag >> 24) as u8
    }

    pub fn is_free(&self) -> bool {
        (self.tag >> 24) as u8 & FLAG_FREE != 0
    }
}

/// What a block is, as far as pointers are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Held {
    /// Objects, all of them in the map.
    Data,
    /// Not objects: a metadata blob, a raw block, an unknown kind.
    Other(&'static str),
    /// Its committed image could not be read: addresses in it are not
    /// checked.
    Unreadable,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Block {
    pub start: u64,
    pub pages: u32,
    pub held: Held,
}

/// Where a persistent address points.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Located<'m> {
    /// The start of an object's body.
    Start(&'m Start),
    /// `by` bytes into the body (or padding) of an object.
    Inside { obj: &'m Start, by: u64 },
    /// Into an object's 8-byte header.
    Header(&'m Start),
    /// Into a data block, where no object is (its page header, or past its
    /// objects).
    Gap { block: u64, offset: u64 },
    /// Into a block that holds no objects.
    Other { block: u64, what: &'static str },
    /// Into a block that could not be read.
    Unreadable,
    /// Below the first data page: the superblocks.
    Reserved,
    /// A page the free-space map lists as free.
    FreePage(u64),
    /// A page past the end of the database.
    Beyond { page: u64, pages: u64 },
}

/// Every block and every object start.
#[derive(Debug)]
pub(crate) struct ObjectMap {
    pub page_size: u64,
    /// How the database stores swizzled pointers (`format/home.rs`).
    pub home: crate::format::home::Home,
    pub first_page: u64,
    pub page_count: u64,
    pub blocks: Vec<Block>,
    pub starts: Vec<Start>,
}

impl ObjectMap {
    /// The block holding `page`.
    pub fn block_of(&self, page: u64) -> Option<&Block> {
        let i = self.blocks.partition_point(|b| b.start <= page);
        let b = self.blocks.get(i.checked_sub(1)?)?;
        (page < b.start + u64::from(b.pages)).then_some(b)
    }

    /// The position in [`starts`](Self::starts) of the object whose body
    /// starts at `addr`, if one does.
    pub fn start_index(&self, addr: u64) -> Option<usize> {
        self.starts.binary_search_by_key(&addr, |s| s.addr).ok()
    }

    /// Where `addr` (not 0) points.
    pub fn locate(&self, addr: u64) -> Located<'_> {
        let i = self.starts.partition_point(|s| s.addr <= addr);
        if let Some(s) = i.checked_sub(1).and_then(|j| self.starts.get(j)) {
            if s.addr == addr {
                return Located::Start(s);
            }
            let by = addr - s.addr;
            if by < align_up(s.size as usize) as u64 {
                return Located::Inside { obj: s, by };
            }
        }
        if let Some(s) = self.starts.get(i)
            && s.addr - addr <= OBJECT_HEADER as u64
        {
            return Located::Header(s);
        }
        let page = addr / self.page_size;
        match self.block_of(page) {
            Some(b) => match b.held {
                Held::Data => Located::Gap {
                    block: b.start,
                    offset: addr - b.start * self.page_size,
                },
                Held::Other(what) => Located::Other {
                    block: b.start,
                    what,
                },
                Held::Unreadable => Located::Unreadable,
            },
            None if page < self.first_page => Located::Reserved,
            None if page < self.page_count => Located::FreePage(page),
            None => Located::Beyond {
                page,
                pages: self.page_count,
            },
        }
    }
}

/// What a block's kind byte makes it.
pub(crate) fn held(kind: u8) -> Held {
    match BlockKind::from_u8(kind) {
        Some(BlockKind::Data) => Held::Data,
        Some(BlockKind::Meta) => Held::Other("metadata blob"),
        Some(BlockKind::Raw) => Held::Other("raw block"),
        None => Held::Other("block of unknown kind"),
    }
}

/// Bytes of block images kept for following pointers into other blocks
/// (vector buffers, index nodes): vectors are allocated near their owners,
/// so most lookups hit.
const CACHE_BYTES: usize = 8 << 20;

/// Committed block images read through the store, a few kept (first in,
/// first out).
#[derive(Debug)]
pub(crate) struct Blocks<'s> {
    store: &'s Store,
    kept: HashMap<u64, Arc<Vec<u8>>>,
    order: VecDeque<u64>,
    bytes: usize,
    /// The first read that failed other than by damage (which the first
    /// pass reported): the check did not run to its end.
    failed: Option<Error>,
}

impl<'s> Blocks<'s> {
    pub fn new(store: &'s Store) -> Blocks<'s> {
        Blocks {
            store,
            kept: HashMap::new(),
            order: VecDeque::new(),
            bytes: 0,
            failed: None,
        }
    }

    /// The committed image of the block starting at `head`; `None` if it
    /// cannot be read (damage the first pass reported, or an error kept for
    /// [`result`](Self::result)).
    pub fn get(&mut self, head: u64) -> Option<Arc<Vec<u8>>> {
        if let Some(b) = self.kept.get(&head) {
            return Some(b.clone());
        }
        let b = match self.store.read_block(head) {
            Ok(b) => Arc::new(b),
            Err(e) => {
                if !e.is_corruption() && self.failed.is_none() {
                    self.failed = Some(e);
                }
                return None;
            }
        };
        while self.bytes + b.len() > CACHE_BYTES
            && let Some(old) = self.order.pop_front()
        {
            if let Some(o) = self.kept.remove(&old) {
                self.bytes -= o.len();
            }
        }
        self.bytes += b.len();
        self.order.push_back(head);
        self.kept.insert(head, b.clone());
        Some(b)
    }

    /// Whether every read that was not of a damaged block succeeded.
    pub fn result(&mut self) -> Result<()> {
        self.failed.take().map_or(Ok(()), Err)
    }
}
