//! `PAGEMAP_SCAN` (Linux 6.7+): ask the kernel which pages were written since
//! they were last write-protected, and re-protect them in the same call.
//!
//! With userfaultfd's asynchronous write-protect the first write to a page is
//! resolved by the kernel with no signal and no message; the only trace is the
//! cleared uffd-wp bit in the page table, which this ioctl reads. Structures are
//! transcribed from `include/uapi/linux/fs.h`.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

use super::sys::{self, iowr};

/// `struct pm_scan_arg`.
#[repr(C)]
#[derive(Default)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

/// `struct page_region`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PageRegion {
    start: u64,
    end: u64,
    categories: u64,
}

const PAGEMAP_SCAN: libc::c_ulong = iowr(b'f', 16, std::mem::size_of::<PmScanArg>());
const PM_SCAN_WP_MATCHING: u64 = 1 << 0;
const PM_SCAN_CHECK_WPASYNC: u64 = 1 << 1;
const PAGE_IS_WRITTEN: u64 = 1 << 1;
const PAGE_IS_FILE: u64 = 1 << 2;
const PAGE_IS_PRESENT: u64 = 1 << 3;
const PAGE_IS_PFNZERO: u64 = 1 << 5;

const _: () = assert!(std::mem::size_of::<PmScanArg>() == 96);
const _: () = assert!(std::mem::size_of::<PageRegion>() == 24);
const _: () = assert!(PAGEMAP_SCAN == 0xc060_6610);

/// An open `/proc/self/pagemap`.
///
/// Opened per FrameSpace. After `fork` the descriptor would describe the
/// parent; the reservation is MADV_DONTFORK, so a child cannot use it anyway.
pub(crate) struct PageMap {
    file: File,
}

impl PageMap {
    /// Opens the file and checks that the kernel knows the ioctl.
    pub(crate) fn open() -> io::Result<PageMap> {
        let file = File::open("/proc/self/pagemap")?;
        let pm = PageMap { file };
        // An empty scan of an empty range: ENOTTY/EINVAL on kernels without it.
        let probe = [0u8; 1];
        let a = probe.as_ptr() as u64 & !(sys::host_page_size() as u64 - 1);
        pm.scan(a, a, 0, Category::WRITTEN, &mut |_, _| {})?;
        Ok(pm)
    }

    /// Calls `out(start, end)` for every run of written host pages in
    /// `[start, end)`, write-protecting them again when `reprotect` is set.
    pub(crate) fn written(
        &self,
        start: u64,
        end: u64,
        reprotect: bool,
        out: &mut dyn FnMut(u64, u64),
    ) -> io::Result<()> {
        let flags = if reprotect {
            PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC
        } else {
            0
        };
        self.scan(start, end, flags, Category::WRITTEN, out)
    }

    /// Calls `out(start, end)` for every run of host pages in `[start,
    /// end)` that hold a private copy: present, neither a page of the file
    /// mapped there nor the shared zero page (a page of a private file
    /// mapping written since it was mapped, or anonymous memory written).
    pub(crate) fn copied(&self, start: u64, end: u64, out: &mut dyn FnMut(u64, u64)) -> io::Result<()> {
        self.scan(start, end, 0, Category::COPIED, out)
    }

    fn scan(
        &self,
        start: u64,
        end: u64,
        flags: u64,
        want: Category,
        out: &mut dyn FnMut(u64, u64),
    ) -> io::Result<()> {
        let mut regions = [PageRegion::default(); 256];
        let mut at = start;
        loop {
            let mut arg = PmScanArg {
                size: std::mem::size_of::<PmScanArg>() as u64,
                flags,
                start: at,
                end,
                vec: regions.as_mut_ptr() as u64,
                vec_len: regions.len() as u64,
                category_inverted: want.inverted,
                category_mask: want.mask,
                return_mask: want.mask,
                ..PmScanArg::default()
            };
            // SAFETY: PmScanArg matches struct pm_scan_arg (size checked above);
            // `vec` points at `vec_len` writable page_region entries on our stack
            // that outlive the call; the scanned range is our own mapping.
            let n = unsafe { sys::ioctl(self.file.as_raw_fd(), PAGEMAP_SCAN, &mut arg)? } as usize;
            let found = &regions[..n.min(regions.len())];
            for r in found {
                out(r.start, r.end);
            }
            // The walk went to the end unless the vector filled up. (On
            // Linux 6.18 `walk_end` may lie below regions the call already
            // reported when it did not fill up: going on from there would
            // report them again.)
            match found.last() {
                Some(last) if n == regions.len() && last.end < end => at = last.end.max(arg.walk_end),
                _ => return Ok(()),
            }
        }
    }
}

/// Which pages a scan reports: those whose categories, `inverted` ones
/// flipped, include all of `mask`.
#[derive(Clone, Copy)]
struct Category {
    inverted: u64,
    mask: u64,
}

impl Category {
    const WRITTEN: Category = Category {
        inverted: 0,
        mask: PAGE_IS_WRITTEN,
    };
    const COPIED: Category = Category {
        inverted: PAGE_IS_FILE | PAGE_IS_PFNZERO,
        mask: PAGE_IS_PRESENT | PAGE_IS_FILE | PAGE_IS_PFNZERO,
    };
}
