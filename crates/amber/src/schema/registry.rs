//! The registry: a database's type ids, their stored descriptors and pointer
//! layouts, and which Rust types the program has bound to them (each checked
//! with every type it reaches, `check.rs`).
//!
//! Layouts come from the catalog, so every page can be swizzled whatever the
//! program has named so far. The fault handler reads them through a snapshot
//! (one `Arc` clone per fault); registration publishes a new snapshot.

use super::check::{Checked, Program, check};
use super::desc::StoredType;
use super::layout::Layout;
use crate::error::{Error, Result};
use std::any::TypeId;
use std::collections::HashMap;
use crate::vm::{AmberLock, Held, held};
use std::sync::{Arc, Mutex, MutexGuard};

/// One type of the database.
#[derive(Debug)]
pub struct TypeEntry {
    /// Its catalog id.
    pub id: u32,
    /// The stored descriptor.
    pub stored: StoredType,
    /// Where its swizzled pointers are.
    pub layout: Layout,
}

/// Layouts by type id, as the fault handler sees them.
pub type Snapshot = Arc<Vec<Option<Arc<TypeEntry>>>>;

#[derive(Debug, Default)]
struct Inner {
    by_name: HashMap<String, u32>,
    by_rust: HashMap<TypeId, u32>,
    /// Ids defined by the open transaction (dropped if it aborts).
    pending: Vec<(u32, Option<TypeId>, String)>,
    /// Program layouts checked against the catalog in this open.
    checked: Checked,
}

/// What binding a program type found.
#[derive(Debug)]
pub enum Binding {
    /// The catalog holds the type under this id, with the program's layout.
    Stored(u32),
    /// The catalog does not hold the type yet; this is its layout, checked
    /// (with everything it reaches) and ready to be defined.
    New(StoredType),
}

/// The registry of one open database.
#[derive(Debug)]
pub struct Registry {
    page_size: usize,
    inner: Mutex<Inner>,
    snapshot: Mutex<Snapshot>,
}

impl Registry {
    /// A registry loaded from the catalog's `(id, descriptor bytes)` pairs.
    pub fn load(page_size: usize, catalog: &[(u32, Vec<u8>)]) -> Result<Registry> {
        let r = Registry {
            page_size,
            inner: Mutex::new(Inner::default()),
            snapshot: Mutex::new(Arc::new(Vec::new())),
        };
        r.extend(catalog)?;
        Ok(r)
    }

    fn lock(&self) -> Held<MutexGuard<'_, Inner>> {
        held(AmberLock::Registry, self.inner.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn insert(&self, id: u32, stored: StoredType, rust: Option<TypeId>) {
        self.insert_all(vec![(id, stored, rust)]);
    }

    /// Adds types and publishes one new snapshot with all of them (one
    /// copy of the table however many there are: a catalog is loaded
    /// whole).
    fn insert_all(&self, types: Vec<(u32, StoredType, Option<TypeId>)>) {
        let mut inner = self.lock();
        let mut snap = self.snapshot.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<_> = (**snap).clone();
        let need = types.iter().map(|t| t.0 as usize + 1).max().unwrap_or(0);
        if v.len() < need {
            v.reserve_exact(need - v.len());
            v.resize(need, None);
        }
        for (id, stored, rust) in types {
            let layout = Layout::of(&stored, self.page_size);
            inner.by_name.insert(stored.name.clone(), id);
            if let Some(t) = rust {
                inner.by_rust.insert(t, id);
            }
            v[id as usize] = Some(Arc::new(TypeEntry { id, stored, layout }));
        }
        *snap = Arc::new(v);
    }

    /// The current snapshot of layouts by id.
    pub fn snapshot(&self) -> Snapshot {
        held(AmberLock::Registry, self.snapshot.lock().unwrap_or_else(|e| e.into_inner())).clone()
    }

    /// One type by id.
    pub fn get(&self, id: u32) -> Option<Arc<TypeEntry>> {
        self.snapshot().get(id as usize).cloned().flatten()
    }

    /// The id already bound to a Rust type, if any (the fast path of every
    /// allocation).
    pub fn bound(&self, rust: TypeId) -> Option<u32> {
        self.lock().by_rust.get(&rust).copied()
    }

    /// Binds a program type (and the Rust type `rust`) to its catalog entry
    /// by name, after checking it and every type it reaches against the
    /// catalog: a difference is `Error::SchemaMismatch` naming the type and
    /// the field.
    pub fn bind(&self, rust: TypeId, program: Program) -> Result<Binding> {
        if let Some(id) = self.bound(rust) {
            return Ok(Binding::Stored(id));
        }
        let snap = self.snapshot();
        let mut inner = self.lock();
        let Inner {
            by_name,
            by_rust,
            checked,
            ..
        } = &mut *inner;
        let layout = check(
            program,
            |name| {
                let id = *by_name.get(name)?;
                snap.get(id as usize)?.as_deref().map(|e| &e.stored)
            },
            checked,
        )?;
        let Some(&id) = by_name.get(&layout.name) else {
            return Ok(Binding::New(layout));
        };
        by_rust.insert(rust, id);
        Ok(Binding::Stored(id))
    }

    /// Adds the catalog's entries this registry does not hold yet (types
    /// another process defined since: a reader's refresh).
    pub fn extend(&self, catalog: &[(u32, Vec<u8>)]) -> Result<()> {
        let snap = self.snapshot();
        let mut new = Vec::new();
        for (id, bytes) in catalog {
            if snap.get(*id as usize).is_some_and(Option::is_some) {
                continue;
            }
            let unreadable = |e: String| {
                Error::invalid(format!(
                    "schema catalog entry for type id {id} is unreadable: {e}"
                ))
            };
            crate::format::meta::check_type_id(*id).map_err(unreadable)?;
            let stored = StoredType::decode(bytes).map_err(unreadable)?;
            new.push((*id, stored, None));
        }
        if !new.is_empty() {
            self.insert_all(new);
        }
        Ok(())
    }

    /// Records a type just defined (under id `id`) by the open transaction.
    pub fn define(&self, id: u32, rust: Option<TypeId>, stored: StoredType) {
        let name = stored.name.clone();
        self.insert(id, stored, rust);
        self.lock().pending.push((id, rust, name));
    }

    /// The open transaction committed: its types are permanent.
    pub fn commit(&self) {
        self.lock().pending.clear();
    }

    /// The open transaction aborted: forget the types it defined.
    pub fn abort(&self) {
        let pending = std::mem::take(&mut self.lock().pending);
        if pending.is_empty() {
            return;
        }
        let mut inner = self.lock();
        let mut snap = self.snapshot.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<_> = (**snap).clone();
        for (id, rust, name) in pending {
            inner.by_name.remove(&name);
            if let Some(t) = rust {
                inner.by_rust.remove(&t);
            }
            if let Some(slot) = v.get_mut(id as usize) {
                *slot = None;
            }
        }
        *snap = Arc::new(v);
    }

    /// All types, by id.
    pub fn all(&self) -> Vec<Arc<TypeEntry>> {
        self.snapshot().iter().flatten().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A catalog naming type ids no object header can hold is refused
    /// (fuzzing found one naming 0x2000_0001, which made a 4 GiB table;
    /// u32::MAX overflowed the next id), and a catalog of high ids is
    /// loaded with one table, of exactly the size needed.
    #[test]
    fn type_ids_beyond_24_bits_are_refused() {
        let leaf = crate::schema::desc::StoredType {
            name: "Leaf".into(),
            size: 8,
            align: 8,
            shape: crate::schema::desc::Shape::Struct(Vec::new()),
        }
        .encode();
        for id in [0, (1 << 24), 0x2000_0001, u32::MAX] {
            assert!(Registry::load(4096, &[(id, leaf.clone())]).is_err(), "{id}");
        }
        let high: Vec<_> = (0..12).map(|i| ((1 << 24) - 16 + i, leaf.clone())).collect();
        let r = Registry::load(4096, &high).expect("loads");
        let snap = r.snapshot();
        assert_eq!((snap.len(), snap.capacity()), ((1 << 24) - 4, (1 << 24) - 4));
    }
}
