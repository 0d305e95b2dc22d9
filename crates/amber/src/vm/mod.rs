//! Virtual memory: the address-space reservation, the frame table, and the
//! fault backends (userfaultfd, SIGSEGV, and the page file mapped at a
//! database's home). The only module allowed unsafe code.
//!
//! # The model
//!
//! A database has pages of `frame_size` bytes (a power of two, at least the
//! host page size). A persistent page number is a `u64` that may be far larger
//! than the address space: it is never a virtual address. A [`FrameSpace`] is
//! one large reservation of address space (MAP_NORESERVE, 64 GiB by default)
//! cut into frames of `frame_size` bytes. The frame table maps pages to frames
//! lazily ([`FrameSpace::assign`]), giving a multi-page object a run of
//! contiguous frames; a frame is never given to another page while the
//! FrameSpace lives, so every swizzled pointer stays valid.
//!
//! A frame that is assigned but not resident is inaccessible. The first touch
//! faults; the backend asks the layer above ([`FaultService::missing`]) to
//! fetch, check and swizzle the page and hand the bytes to
//! [`Installer::install`], which makes them visible atomically: no thread ever
//! sees a half-filled frame.
//!
//! # What each backend does
//!
//! | event | `Uffd` | `Sigsegv` |
//! |---|---|---|
//! | reservation | private anonymous, registered with one userfaultfd (missing + write-protect) | a memfd mapped twice: the program's view `PROT_NONE`, a staging view always read-write |
//! | first touch of a non-resident frame | the kernel queues a message; the handler thread calls `missing`, which installs with `UFFDIO_COPY` (atomic); the thread is woken when `missing` returns | SIGSEGV; the handler posts the frame to the space's service thread and waits (futex); the service thread calls `missing`; install writes the memfd (`pwrite`), then `mprotect`s the frames readable; the handler returns |
//! | first write to a clean frame (tracking on) | resolved by the kernel (`UFFD_FEATURE_WP_ASYNC`): no signal, no message | SIGSEGV; in the handler, `first_write(frame, clean)`, then `mprotect` read-write and note the frame |
//! | `take_written` | `PAGEMAP_SCAN` for written pages, re-protecting them in the same ioctl | the noted frames, `mprotect`ed read-only again (all or nothing) |
//! | `evict` | `MADV_DONTNEED` | `mprotect(PROT_NONE)`, then punch a hole in the memfd |
//! | `evict_clean_batch` while writers may run | `mprotect` read-only over the batch's span, one `PAGEMAP_SCAN`, `MADV_DONTNEED` per unwritten victim, the span read-write again | claim the frames CLEAN → EVICTING against the first-write handler, then as `evict` |
//! | `copy_out` / `copy_in` | make resident, then memcpy through the program's view under the lock | memcpy through the staging view under the lock |
//!
//! The third backend, `MappedUnverified` (`mapped.rs`, `mapped_writes.rs`),
//! has no missing frame: the page file is mapped copy-on-write over the
//! reservation, placed at the database's home, and the kernel serves every
//! first touch from its page cache; a window is read-only until its first
//! write, a SIGSEGV that watches it with asynchronous write-protect, and
//! `PAGEMAP_SCAN` of the watched windows lists what was written; `evict`
//! drops private copies (the frames read the file again) and a block met
//! by `ensure_resident` is checked by the service without being installed.
//! The fourth, `Mapped` (`mapped_checks.rs`), is the same mapping with
//! every frame inaccessible until checked: the first touch of a frame not
//! checked yet is a SIGSEGV whose handler hands it to a service thread (as
//! the SIGSEGV backend does), which checks every block of the frame's check
//! window and opens the clean ones.
//!
//! Neither `copy_in` nor `install` counts as a program write: a frame's
//! clean/written status is unchanged by `copy_in` (so the layer above can restore
//! a page after an abort and re-arm it with [`FrameSpace::write_protect`]).
//!
//! # Measured costs
//!
//! `cargo run --release -p amber --example vm_costs` on the 2-vCPU AMD EPYC
//! guest, Linux 6.18, 4 KiB frames, medians over 3,000-4,000 pages (ranges
//! over three to six runs, while other builds kept the load average at
//! 3-5; the default spin of 200 µs):
//!
//! | event | `Sigsegv` | `Uffd` |
//! |---|---|---|
//! | cold read fault, fill by one memcpy | 9-15 µs (8.1-8.6 when served in the handler) | 8.1-9.0 µs |
//! | the same after 1 ms idle | 22-37 µs | 16-20 µs |
//! | first write to a tracked page | 4.8-6.4 µs | 0.73-1.0 µs |
//! | `take_written`, per page scanned (1 in 10 written) | 270-450 ns | 6-9 ns |
//! | evict + refault | 20-27 µs | 11-12 µs |
//! | `evict_clean` + refault, no writers / writers may run | 20-26 / 20-28 µs | 12-13 / 17-25 µs |
//!
//! # Errors during a fault
//!
//! When the program dereferences a pointer into a page that cannot be fetched
//! (a checksum failure, an I/O error, `mprotect` out of map entries), a plain
//! load has no way to return an error. Amber then writes one line,
//! `amber: fatal: page N: <message>`, to stderr and aborts the process (from
//! the faulting thread with SIGSEGV, from the handler thread with
//! userfaultfd): it never installs wrong data and never leaves the thread
//! hanging. Code that wants an error instead calls
//! [`FrameSpace::ensure_resident`] before dereferencing: it runs the service in
//! the calling thread and returns the service's error. Touching a frame that
//! was never assigned (a wild pointer into the reservation) also aborts with a
//! message. `VmError::into_error` turns any of these into the crate's
//! `Error` (`Error::Vm` for the machine's limits, with the remedy).
//!
//! # Locks and faults
//!
//! The fault service takes locks (the store's, the pager's, the registry's,
//! the frame table's: [`AmberLock`]). A thread that touched a non-resident
//! frame while holding one would wait for a service waiting for it. Amber
//! never does; and rather than rely on it, every such lock is counted per
//! thread when taken (`held()`), and every way into the fault path checks the
//! faulting thread's count first: the SIGSEGV handler and the userfaultfd
//! handler thread (which learns the faulting thread from the kernel) abort
//! with a message naming the lock, `ensure_resident` and the locked copies
//! return an error (see `held.rs`).
//!
//! # Limits and rules
//!
//! - `Sigsegv`: each frame whose protection differs from its neighbour's is a
//!   separate kernel VMA, and `vm.max_map_count` (65,530 by default) caps them:
//!   scattered resident frames beyond roughly 32,000 make `mprotect` fail, which
//!   is reported as [`VmError::MapCount`], with the remedy (an error from
//!   `ensure_resident` and the commit path; fatal only for a plain load or
//!   store, which cannot return one). Installing neighbours together (a fetch
//!   cluster) keeps runs merged.
//! - `Sigsegv`: the SIGSEGV handler does only async-signal-safe work (an
//!   atomic post and a futex wait for a missing page; the recovery-buffer
//!   copy under a [`SpinLock`] and an `mprotect` for a first write), so any
//!   thread may touch frames, on any stack, without preparation. The fetch
//!   runs on the space's service thread (`service.rs`). The handler chains to
//!   the previous SIGSEGV handler for addresses outside every live
//!   FrameSpace. Every FrameSpace registers with it, userfaultfd ones too
//!   (for writes that meet an eviction's write protection).
//! - Every reservation starts at a multiple of the frame size, by
//!   construction (`sys::Mapping::reserve`), so frames are page-aligned on
//!   every backend; still, every address ↔ page conversion takes its offset
//!   from the frame's base ([`FrameSpace::frame_addr`]), never by masking
//!   the address.
//! - `Uffd`: the descriptor is opened with `UFFD_USER_MODE_ONLY`, so a
//!   non-resident page passed to a system call (`write(fd, ptr, n)`) fails with
//!   EFAULT instead of being fetched: use `copy_out`, or `ensure_resident` first.
//! - The reservation is `MADV_DONTFORK`: a forked child does not inherit it.
//! - The service must not keep a strong `Arc<FrameSpace>` (it would be a cycle,
//!   and dropping the last one from inside a callback is not supported); it
//!   reaches the FrameSpace through the [`Installer`].
//! - Dropping a FrameSpace unregisters it, stops its handler or service thread, and replaces the
//!   reservation with inaccessible memory that is never unmapped: a stale
//!   pointer into it crashes (through the previous SIGSEGV handler) rather than
//!   reading memory that a later `mmap` placed at the same address. The cost is
//!   address space only (no memory), 64 GiB per dropped space by default.

mod barrier;
mod buffer;
mod copies;
mod fault;
mod frame_table;
mod held;
mod lock;
mod mapped;
mod mapped_checks;
mod mapped_writes;
mod pagemap;
mod reads;
#[cfg(feature = "internals")]
pub mod probe;
mod residency;
mod service;
mod sigsegv;
mod space;
mod sys;
mod tracking;
mod typed;
mod types;
mod uffd;

pub use barrier::{Barrier, Memory};
pub use buffer::BigBuf;
pub use copies::CopyBuf;
pub use held::{AmberLock, Held, HeldSet, held};
pub use lock::{SpinGuard, SpinLock};
pub use mapped::MappedFile;
pub use mapped_checks::CHECK_WINDOW;
pub use space::{FrameSpace, Installer};
pub(crate) use space::chooses_mapped;
pub use typed::{Access, Field, NotLive, Persistent, check_layout};
pub use types::{
    Backend, BackendChoice, FaultError, FaultKind, FaultService, FrameNo, InstallAs, VmConfig,
    VmError,
};
