//! The database a program opens: persistent objects reached through ordinary
//! pointers, faulted in and swizzled a page at a time.
//!
//! ```no_run
//! use amber::{Db, Options, PRef, Persistent};
//!
//! #[derive(Persistent)]
//! #[repr(C)]
//! struct Node { value: u64, next: Option<PRef<Node>> }
//!
//! # fn main() -> amber::Result<()> {
//! let mut db = Db::create("list.amber", Options::default())?;
//! let mut tx = db.begin()?;
//! let tail = tx.alloc(Node { value: 2, next: None })?;
//! let head = tx.alloc(Node { value: 1, next: Some(tail) })?;
//! tx.set_root("head", head)?;
//! tx.commit()?;
//!
//! let head: PRef<Node> = db.root("head")?.expect("root");
//! let next = db.get(head).next.expect("two nodes");
//! assert_eq!(db.get(next).value, 2); // a plain pointer load
//! # Ok(()) }
//! ```

mod alloc;
mod commit;
mod dead;
mod fetch;
mod free;
pub(crate) mod index;
mod mapped;
pub mod options;
pub(crate) mod pager;
mod read;
mod readahead;
mod reader;
mod recovery_buffer;
mod session;
mod spill;
pub mod strategy;
mod text;
pub mod tx;
mod vec;

use crate::error::{Error, Result};
use crate::format::objects::OBJECT_HEADER;
use crate::io::Vfs;
use crate::io::real::RealVfs;
use crate::ptr::{PBytes, PRef, PVec, Smart};
use crate::schema::check::Program;
use crate::schema::registry::{Binding, Registry};
use crate::source::Source;
use crate::store::{Store, StoreStats};
use crate::vm::{
    Access, Backend, FaultError, FaultKind, FaultService, Field, FrameNo, FrameSpace, Installer,
    NotLive, Persistent, VmConfig,
};
use pager::Pager;
use session::{Parts, Session};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

pub use options::Options;
pub use strategy::{Detect, Log, Strategy};
pub use read::View;
pub use tx::{CommitStats, Tx};

/// Numbers about an open database.
#[derive(Debug, Clone)]
pub struct DbStats {
    /// The store's numbers.
    pub store: StoreStats,
    /// Faults served.
    pub faults: u64,
    /// Blocks fetched (cluster neighbours included).
    pub fetched: u64,
    /// Blocks evicted to respect the cache budget.
    pub evicted: u64,
    /// Frames resident.
    pub resident_frames: u64,
    /// Frames assigned (address space reserved for pages).
    pub assigned_frames: u64,
    /// Dirty blocks spilled because a transaction outgrew the budget.
    pub spilled: u64,
    /// Pages logged early because the recovery buffer was full.
    pub early_logged: u64,
    /// Recovery-buffer copies dropped unlogged (their pages were diffed
    /// against the committed image instead).
    pub copies_dropped: u64,
    /// Switches between page protection and a software detection scheme
    /// (each re-protects or unprotects every resident page).
    pub detection_switches: u64,
}

/// An open database.
#[derive(Debug)]
pub struct Db {
    /// Where committed pages, roots and types come from.
    pub(crate) source: Arc<dyn Source>,
    /// The same store when the database is in this process: what writes
    /// need (`None` for a server's database).
    pub(crate) store: Option<Arc<Store>>,
    pub(crate) registry: Arc<Registry>,
    pub(crate) pager: Arc<Pager>,
    pub(crate) fs: Arc<FrameSpace>,
    pub(crate) access: Access,
    pub(crate) session: Session,
    /// What it was opened with (a collection reopens it so).
    pub(crate) opts: Options,
}

impl Db {
    /// Creates a new database at `path` (and `path-wal`).
    pub fn create(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        Self::create_on(Arc::new(RealVfs), path.as_ref(), opts)
    }

    /// Opens the database at `path`, recovering it if needed.
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        Self::open_on(Arc::new(RealVfs), path.as_ref(), opts)
    }

    /// Opens the database at `path`, or creates it there when there is no
    /// file at `path`. A log without its database is an error, as for
    /// [`create`](Self::create) (it may hold another database's commits).
    /// Should another process create the database at the same moment, the
    /// one that loses the race opens what the other created, or, if the
    /// other has not finished, gets the error that says so.
    pub fn open_or_create(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let path = path.as_ref();
        let missing = |e: &Error| {
            matches!(e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
        };
        match Self::open(path, opts.clone()) {
            Err(e) if missing(&e) && !path.exists() => match Self::create(path, opts.clone()) {
                Err(_) if path.exists() => Self::open(path, opts),
                created => created,
            },
            opened => opened,
        }
    }

    /// Creates a database on a given file system (crash model, fault
    /// injection).
    #[cfg(feature = "internals")]
    #[doc(hidden)]
    pub fn create_with(vfs: Arc<dyn Vfs>, path: &Path, opts: Options) -> Result<Db> {
        Self::create_on(vfs, path, opts)
    }

    /// Opens a database on a given file system.
    #[cfg(feature = "internals")]
    #[doc(hidden)]
    pub fn open_with(vfs: Arc<dyn Vfs>, path: &Path, opts: Options) -> Result<Db> {
        Self::open_on(vfs, path, opts)
    }

    fn create_on(vfs: Arc<dyn Vfs>, path: &Path, opts: Options) -> Result<Db> {
        let mut so = opts.store_options();
        so.page_size = opts.page_size;
        let store = Arc::new(Store::create(vfs, path, so)?);
        Self::start(store.clone(), Some(store), &opts)
    }

    pub(crate) fn open_on(vfs: Arc<dyn Vfs>, path: &Path, opts: Options) -> Result<Db> {
        let store = Arc::new(Store::open(vfs, path, opts.store_options())?);
        Self::start(store.clone(), Some(store), &opts)
    }

    /// Sets up the object layer over `source` (`store`: the same, when it
    /// is in this process).
    pub(crate) fn start(
        source: Arc<dyn Source>,
        store: Option<Arc<Store>>,
        opts: &Options,
    ) -> Result<Db> {
        let ps = source.page_size();
        let registry = Arc::new(Registry::load(ps, &source.types())?);
        let pager = Arc::new(Pager::new(
            source.clone(),
            registry.clone(),
            readahead::Readahead::new(opts.fetch_cluster, opts.fetch_adaptive, source.page_count()),
            opts.cache_bytes,
        ));
        let cfg = VmConfig {
            backend: opts.backend,
            frame_size: ps,
            reserve_bytes: opts.reserve_bytes,
            track_writes: true,
            direct_pages: source.page_count(),
            home: usize::try_from(source.home().addr()).unwrap_or(0),
            file: mapped::page_file(&*source, store.as_deref(), opts),
            writers: false,
            ..VmConfig::default()
        };
        let fs = FrameSpace::new(cfg, pager.clone())
            .map_err(|e| e.into_error(source.name(), "setting up the frame space"))?;
        if let (true, Some(store)) = (fs.backend().is_mapped(), &store) {
            mapped::record_runs(&fs, store)?;
        }
        let access =
            Access::take(&fs).ok_or_else(|| Error::invalid("frame space already in use"))?;
        // The choice depends on the kernel and the environment, and a
        // benchmark or a bug report means little without it.
        log::info!(
            "{}: fault backend {} ({})",
            source.name().display(),
            fs.backend(),
            fs.backend_reason()
        );
        if fs.backend() == Backend::Sigsegv {
            let _ = pager.rbuf.set(recovery_buffer::RecoveryBuffer::new(
                opts.recovery_buffer_pages,
                ps,
            ));
        }
        Ok(Db {
            source,
            store,
            registry,
            pager,
            fs,
            access,
            session: Session::default(),
            opts: opts.clone(),
        })
    }

    /// The fault backend opening a database with `opts` would use on this
    /// machine, and why, without a database: a one-frame frame space is set
    /// up with the same choice and dropped (for `amber inspect`, and for
    /// programs that report their environment). Like opening, a probe that
    /// lands on SIGSEGV installs Amber's signal handler in the process.
    pub fn probe_backend(opts: &Options) -> Result<(Backend, String)> {
        let cfg = VmConfig {
            backend: opts.backend,
            frame_size: opts.page_size,
            reserve_bytes: opts.page_size as u64,
            track_writes: true,
            ..VmConfig::default()
        };
        let fs = FrameSpace::new(cfg, Arc::new(NoPages))
            .map_err(|e| e.into_error(Path::new(""), "setting up a frame space"))?;
        Ok((fs.backend(), fs.backend_reason().to_string()))
    }

    /// The fault backend in use.
    pub fn backend(&self) -> Backend {
        self.fs.backend()
    }

    /// Why that backend was chosen.
    pub fn backend_reason(&self) -> &str {
        self.fs.backend_reason()
    }

    /// Whether the database's pages sit at its home: where the addresses
    /// its pointers are stored as are the addresses they point to, so that
    /// pages need no translation (docs/design.md §4.3). False for a
    /// database without a home (created before homes), or when something
    /// else occupies the range (another database with the same home,
    /// another mapping): pages are then translated as they are fetched.
    pub fn at_home(&self) -> bool {
        self.fs.at_home()
    }

    /// Page size in bytes.
    pub fn page_size(&self) -> usize {
        self.source.page_size()
    }

    /// The storage layer underneath (Amber's own benchmarks and tests).
    /// Panics for a served database, which has none here.
    #[cfg(feature = "internals")]
    #[doc(hidden)]
    pub fn store(&self) -> &Store {
        match &self.store {
            Some(s) => s,
            None => panic!("{}: a served database has no store here", self.source.name().display()),
        }
    }

    /// The frame space (Amber's own benchmarks: the mapped backend's cold
    /// reads are measured after its frames are given back to the file).
    #[cfg(feature = "internals")]
    #[doc(hidden)]
    pub fn frame_space(&self) -> &FrameSpace {
        &self.fs
    }

    /// The store in this process, for `what` (which only a database in
    /// this process does).
    pub(crate) fn local(&self, what: &str) -> Result<&Arc<Store>> {
        self.store.as_ref().ok_or_else(|| {
            Error::invalid(format!(
                "{}: {what} is not available through a server (it runs on the server's machine)",
                self.source.name().display()
            ))
        })
    }

    /// Numbers about faults, residency and the store.
    pub fn stats(&self) -> DbStats {
        let s = &self.pager.stats;
        DbStats {
            store: self.source.stats(),
            faults: s.faults.load(Ordering::Relaxed),
            fetched: s.fetched.load(Ordering::Relaxed),
            evicted: s.evicted.load(Ordering::Relaxed),
            resident_frames: s.resident.load(Ordering::Relaxed),
            assigned_frames: u64::from(self.fs.assigned_frames()),
            spilled: s.spilled.load(Ordering::Relaxed),
            early_logged: self
                .pager
                .rbuf
                .get()
                .map_or(0, |b| b.early_logged.load(Ordering::Relaxed)),
            copies_dropped: self
                .pager
                .rbuf
                .get()
                .map_or(0, |b| b.dropped.load(Ordering::Relaxed)),
            detection_switches: s.detection_switches.load(Ordering::Relaxed),
        }
    }

    /// Follows a pointer: a plain load once the page is resident (the first
    /// touch faults it in), after checking the object header it lands on.
    ///
    /// # Panics
    ///
    /// If `p` is stale: it leads to a freed object, to space of a
    /// transaction that aborted or failed to commit, or it comes from
    /// another database or a closed session of this one. The message names
    /// the pointer; [`try_get`](Self::try_get) returns
    /// [`Error::Dangling`] instead. (A damaged page met here aborts the
    /// process naming the page: a load cannot return an error.)
    #[inline(always)]
    pub fn get<T: Persistent>(&self, p: PRef<T>) -> &T {
        self.access.object(p.addr())
    }

    /// Follows a pointer, fetching its page first so that a damaged page is
    /// an error here ([`Error::Corrupt`]) instead of a fatal fault at the
    /// load, and a stale pointer is [`Error::Dangling`] instead of a panic.
    pub fn try_get<T: Persistent>(&self, p: PRef<T>) -> Result<&T> {
        View::try_get(self, p)
    }

    /// The elements of a persistent vector ([`View::slice`]).
    ///
    /// # Panics
    ///
    /// If the vector's buffer is not a live buffer of this database (a
    /// vector moved out of an object and kept past its buffer's life).
    #[inline(always)]
    pub fn slice<'a, T: Field>(&'a self, v: &'a PVec<T>) -> &'a [T] {
        View::slice(self, v)
    }

    /// The bytes of a persistent byte string (panics as
    /// [`slice`](Self::slice) does).
    #[inline(always)]
    pub fn bytes<'a>(&'a self, b: &'a PBytes) -> &'a [u8] {
        View::bytes(self, b)
    }

    /// Follows a smart pointer: translates its persistent address through
    /// the frame table (reserving a frame if needed) at each use. A stale
    /// one is [`Error::Dangling`], a damaged page [`Error::Corrupt`].
    pub fn smart<T: Persistent>(&self, s: Smart<T>) -> Result<&T> {
        View::smart(self, s)
    }

    /// A named root, if it exists ([`View::root`]). Its stored type must be
    /// `T`, and the stored layouts of `T` and of every type it reaches must
    /// be the program's.
    pub fn root<T: Persistent>(&self, name: &str) -> Result<Option<PRef<T>>> {
        View::root(self, name)
    }

    /// Checks that the database's layouts of `T` and of every type it
    /// reaches (through nesting, arrays, pointers, vectors and indexes) are
    /// the program's: an error names the type and the first differing field.
    /// Types the database has not stored yet are fine.
    pub fn check_type<T: Persistent>(&self) -> Result<()> {
        self.bind::<T>().map(|_| ())
    }

    fn bind<T: Persistent>(&self) -> Result<Binding> {
        self.registry
            .bind(std::any::TypeId::of::<T>(), Program::Struct(&T::DESC))
    }

    /// Starts a transaction. Only one at a time: it borrows the database
    /// exclusively, so no reference into it can be held meanwhile.
    pub fn begin(&mut self) -> Result<Tx<'_>> {
        let strategy = self.opts.strategy;
        self.begin_with(strategy)
    }

    /// Runs `f` in a transaction and commits it; runs it again while the
    /// commit loses to a concurrent transaction ([`Error::Conflict`], a
    /// server's database), up to 16 times, pausing a growing, jittered
    /// while between attempts so that two clients that keep colliding
    /// drift apart. `f` must leave nothing outside the database behind
    /// that a second run would repeat. Any other error of `f` or of the
    /// commit ends it (the transaction rolled back).
    pub fn transact<R>(&mut self, mut f: impl FnMut(&mut Tx<'_>) -> Result<R>) -> Result<R> {
        const ATTEMPTS: u32 = 16;
        let mut pause = std::time::Duration::from_micros(200);
        let mut attempt = 1;
        loop {
            let mut tx = self.begin()?;
            let done = match f(&mut tx) {
                Ok(r) => tx.commit().map(|_| r),
                Err(e) => Err(e),
            };
            match done {
                Err(e) if e.is_conflict() && attempt < ATTEMPTS => {
                    // From half to one and a half times the pause.
                    let clock = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.subsec_nanos());
                    std::thread::sleep(pause * (clock % 1000 + 500) / 1000);
                    pause = (pause * 2).min(std::time::Duration::from_millis(100));
                    attempt += 1;
                }
                done => return done,
            }
        }
    }

    /// Starts a transaction that detects its updates (and, as they come,
    /// logs them) as `strategy` says, whatever the database's default
    /// ([`Options::strategy`]); under [`Strategy::AUTO`], as the database
    /// chooses for it. Switching between page protection and a
    /// software scheme re-protects or unprotects every resident page, so
    /// alternating costs a pass over them (`DbStats::detection_switches`).
    pub fn begin_with(&mut self, strategy: Strategy) -> Result<Tx<'_>> {
        let began = Instant::now();
        strategy.check()?;
        self.end_forgotten();
        if let Some(why) = &self.session.broken {
            return Err(Error::Poisoned { cause: why.clone() });
        }
        let (run, arm) = if strategy.is_auto() {
            let arm = self.session.auto.choose();
            (strategy::auto::ARMS[arm], Some(arm))
        } else {
            (strategy, None)
        };
        let switched = self.arm(run.detect)?;
        let armed = Instant::now();
        let mut tx = Tx::new(self, run)?;
        tx.auto = arm.map(|arm| tx::AutoTx {
            arm,
            armed,
            switch: switched.then(|| armed - began),
        });
        Ok(tx)
    }

    /// Puts the frame space and the accessor's barrier in the state
    /// `detect` needs (between transactions: nothing is written); whether
    /// that switched between page protection and a barrier.
    fn arm(&mut self, detect: Detect) -> Result<bool> {
        let barrier = strategy::Software::new(detect, self.fs.base() as u64);
        let software = barrier.is_some();
        let barrier_was = self.fs.barrier_mode();
        if barrier_was != software {
            self.fs
                .set_barrier_mode(software)
                .map_err(|e| e.into_error(self.source.name(), "switching update detection"))?;
            self.pager.stats.detection_switches.fetch_add(1, Ordering::Relaxed);
        }
        let current = self
            .access
            .barrier_mut()
            .and_then(|b| b.as_any_mut().downcast_mut::<strategy::Software>());
        match (current, barrier) {
            // The same scheme again: its records (and their allocations)
            // are reused.
            (Some(s), Some(_)) if s.scheme() == detect => s.clear(),
            (_, barrier) => self
                .access
                .set_barrier(barrier.map(|b| Box::new(b) as Box<dyn crate::vm::Barrier>)),
        }
        Ok(barrier_was != software)
    }

    /// Rolls back a transaction that was dropped with `mem::forget` (its
    /// destructor never ran, so its writes are still in memory): none of
    /// its bytes may reach the log.
    fn end_forgotten(&mut self) {
        if !self.session.tx.active {
            return;
        }
        log::warn!(
            "{}: a transaction was forgotten without commit or abort; rolling it back",
            self.source.name().display()
        );
        let parts = Parts {
            source: &*self.source,
            fs: &self.fs,
            pager: &self.pager,
            registry: &self.registry,
        };
        let Session {
            current, broken, tx, ..
        } = &mut self.session;
        self.source.forget_tx(tx.txid);
        self.access.take_reads();
        if let Some(why) = session::rollback(&parts, tx, current) {
            *broken = Some(format!("rolling back a forgotten transaction: {why}"));
        }
    }

    /// Installs committed changes into the page file now. (A transaction
    /// forgotten with `mem::forget` is not in the store: only the next
    /// `begin` or `close` can roll its writes back out of memory.)
    pub fn checkpoint(&self) -> Result<()> {
        self.local("a checkpoint")?.checkpoint().map(|_| ())
    }

    /// Closes the database, checkpointing first.
    pub fn close(self) -> Result<()> {
        match self.end_session() {
            Some(Ok(s)) => s.close(),
            Some(Err(s)) => s.checkpoint().map(|_| ()),
            None => Ok(()),
        }
    }

    /// The store, once this session is over (for a collection, which
    /// checkpoints it and keeps its lock); an error if something else
    /// still holds it (then it has been checkpointed, as a close does).
    pub(crate) fn into_store(self) -> Result<Store> {
        let name = self.source.name().to_path_buf();
        match self.end_session() {
            Some(Ok(s)) => Ok(s),
            Some(Err(s)) => {
                s.checkpoint()?;
                Err(Error::internal(
                    "the store is still held elsewhere after the session ended",
                ))
            }
            None => Err(Error::invalid(format!(
                "{}: a served database has no store in this process",
                name.display()
            ))),
        }
    }

    /// Ends the session: no pointer of it can be followed any more. Returns
    /// the local store, or its handle if something else still holds it
    /// (`None`: a served database, which has none here).
    fn end_session(mut self) -> Option<std::result::Result<Store, Arc<Store>>> {
        self.end_forgotten();
        // The session ends: no pointer into its dead space can be followed
        // any more, so the blocks of transactions that did not commit go
        // back to the free space before the last checkpoint writes it.
        if let Some(store) = &self.store {
            for (head, _) in self.pager.dead.blocks() {
                store.unreserve(head);
            }
        }
        let Db {
            source,
            store,
            fs,
            access,
            pager,
            ..
        } = self;
        drop(access);
        drop(fs);
        drop(pager);
        drop(source);
        store.map(Arc::try_unwrap)
    }
}

/// The fault service of a probe's frame space, which assigns no frame to a
/// page and so is never asked for one.
struct NoPages;

impl FaultService for NoPages {
    fn missing(
        &self,
        frame: FrameNo,
        _: &mut Installer<'_>,
    ) -> std::result::Result<(), FaultError> {
        Err(FaultError::new(
            u64::MAX,
            FaultKind::Internal,
            format!("frame {frame}: a probe has no pages"),
        ))
    }

    fn first_write(&self, _: FrameNo, _: &[u8]) {}
}

/// The live `T` whose body is at `addr`, fetched first so that every
/// failure is an error: a damaged page, a stale pointer.
pub(crate) fn checked<'a, T: Field>(
    fs: &FrameSpace,
    access: &'a Access,
    path: &Path,
    addr: u64,
) -> Result<&'a T> {
    let dangling = |why: NotLive| match why {
        NotLive::Foreign => Error::invalid(why.describe(addr)),
        _ => Error::dangling(why.describe(addr)),
    };
    fs.frame_at(addr as usize)
        .ok_or_else(|| dangling(access.try_object::<T>(addr).err().unwrap_or(NotLive::Foreign)))?;
    let header = addr.saturating_sub(OBJECT_HEADER as u64);
    ensure_span(fs, path, header, addr.saturating_add(std::mem::size_of::<T>() as u64))?;
    access.try_object(addr).map_err(dangling)
}

/// Makes resident every frame `[lo, hi)` touches (an object's header and
/// body, a buffer), so that reading it meets a damaged page, or one that is
/// not this database's, as an error rather than the abort a plain load
/// would meet. An object or buffer lies in its block, fetched whole, so
/// this costs one more lookup, unless damage (a header claiming more than
/// its block holds, a pointer near a block's end) makes it reach beyond.
pub(crate) fn ensure_span(fs: &FrameSpace, path: &Path, lo: u64, hi: u64) -> Result<()> {
    let frame = fs.frame_size() as u64;
    let mut at = lo;
    while at < hi {
        let f = fs
            .frame_at(at as usize)
            .ok_or_else(|| Error::dangling(format!("{at:#x} lies outside this database")))?;
        fs.ensure_resident(f).map_err(|e| fault_error(path, e))?;
        at = fs.frame_addr(f) as u64 + frame;
    }
    Ok(())
}

/// The error a failed fault becomes, by its kind.
pub(crate) fn fault_error(path: &Path, e: FaultError) -> Error {
    let page = e.page;
    match e.kind {
        FaultKind::Corrupt => Error::Corrupt {
            file: crate::error::FileKind::PageFile,
            path: path.to_path_buf(),
            at: crate::error::Location::Page(page),
            what: e.message,
        },
        FaultKind::Io => Error::Io {
            op: "read page",
            path: path.to_path_buf(),
            source: std::io::Error::other(format!("page {page}: {}", e.message)),
        },
        FaultKind::Dangling => Error::dangling(format!("page {page}: {}", e.message)),
        FaultKind::Vm => Error::Vm {
            what: format!("page {page}: {}", e.message),
            source: None,
        },
        FaultKind::Internal => Error::internal(format!("page {page}: {}", e.message)),
    }
}

/// The virtual address of persistent address `paddr` in `fs`.
pub(crate) fn translate(fs: &FrameSpace, paddr: u64, pages: u32) -> Result<u64> {
    let shift = fs.frame_size().trailing_zeros();
    let f = fs
        .assign(paddr >> shift, pages)
        .map_err(|e| e.into_error(Path::new(""), &format!("persistent address {paddr:#x}")))?;
    Ok(fs.frame_addr(f) as u64 + (paddr & ((1 << shift) - 1)))
}
